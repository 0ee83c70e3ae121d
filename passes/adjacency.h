// Adjacency lists over dense node (or group) indices, all in one array (compressed rows), for
// the planners' dependence graphs (passes/schedule.cpp, passes/peak_bound.cpp): one allocation
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
    Lists t;
    t.start.assign(n + 1, 0);
    for (int j : items) ++t.start[static_cast<size_t>(j) + 1];
    for (size_t j = 0; j < n; ++j) t.start[j + 1] += t.start[j];
    t.items.resize(items.size());
    std::vector<int> next(t.start.begin(), t.start.end() - 1);
    for (size_t i = 0; i < size(); ++i)
      for (int j : (*this)[i]) t.items[static_cast<size_t>(next[static_cast<size_t>(j)]++)] = static_cast<int>(i);
    return t;
  }

  static Lists fromPairs(size_t n, const std::vector<std::pair<int, int>>& pairs) {
    Lists l;
    l.start.assign(n + 1, 0);
    for (const auto& [from, to] : pairs) ++l.start[static_cast<size_t>(from) + 1];
    for (size_t i = 0; i < n; ++i) l.start[i + 1] += l.start[i];
    l.items.resize(pairs.size());
    std::vector<int> next(l.start.begin(), l.start.end() - 1);
    for (const auto& [from, to] : pairs) l.items[static_cast<size_t>(next[static_cast<size_t>(from)]++)] = to;
    return l;
  }
};

}  // namespace gradc::passes
