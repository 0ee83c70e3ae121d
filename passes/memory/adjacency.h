// Adjacency lists over dense node (or group) indices, all in one array (compressed rows), for
// the planners' dependence graphs (passes/schedule.cpp, passes/memory/peak_bound.cpp): one allocation
// per graph instead of one per node.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace gradc::passes {

// Adjacency lists in one array (compressed rows): list i is items[start[i] .. start[i+1]).
// Built from (source, target) pairs by a stable counting sort, so each list keeps the order in
// which its pairs were found.
struct Lists {
  // Rows appended in order: items.push_back(...) for row i, then endRow().
  void endRow() { start.push_back(static_cast<int>(items.size())); }

  std::vector<int> start{0};
  std::vector<int> items;

  std::span<const int> operator[](size_t i) const {
    return {items.data() + start[i], static_cast<size_t>(start[i + 1] - start[i])};
  }
  size_t size() const { return start.size() - 1; }

  // The lists of n rows in which row j holds every i whose row here holds j, ascending.
  Lists transposed(size_t n) const {
    return sorted(n, items.size(), [this](auto&& pair) {
      for (size_t i = 0; i < size(); ++i)
        for (int j : (*this)[i]) pair(j, static_cast<int>(i));
    });
  }

  static Lists fromPairs(size_t n, const std::vector<std::pair<int, int>>& pairs) {
    return sorted(n, pairs.size(), [&pairs](auto&& pair) {
      for (const auto& [from, to] : pairs) pair(from, to);
    });
  }

 private:
  // The stable counting sort: `each(pair)` calls pair(from, to) for all `total` pairs, the same
  // ones in the same order each time it is called (twice: to count, then to place).
  template <typename Each>
  static Lists sorted(size_t n, size_t total, Each each) {
    Lists l;
    l.start.assign(n + 1, 0);
    each([&l](int from, int) { ++l.start[static_cast<size_t>(from) + 1]; });
    for (size_t i = 0; i < n; ++i) l.start[i + 1] += l.start[i];
    l.items.resize(total);
    std::vector<int> next(l.start.begin(), l.start.end() - 1);
    each([&](int from, int to) { l.items[static_cast<size_t>(next[static_cast<size_t>(from)]++)] = to; });
    return l;
  }
};

}  // namespace gradc::passes
