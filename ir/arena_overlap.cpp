#include "ir/arena_overlap.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

namespace gradc::ir {

bool insideArena(const ArenaInterval& b, std::int64_t arenaBytes) {
  return b.size >= 0 && b.offset >= 0 && arenaBytes >= 0 && b.offset <= arenaBytes && b.size <= arenaBytes - b.offset;
}

std::optional<std::pair<std::size_t, std::size_t>> findArenaOverlap(std::span<const ArenaInterval> bs) {
  std::vector<std::size_t> byFirst, byLast;
  for (std::size_t i = 0; i < bs.size(); ++i) {
    if (bs[i].size == 0) continue;
    byFirst.push_back(i);
    byLast.push_back(i);
  }
  std::stable_sort(byFirst.begin(), byFirst.end(),
                   [&](std::size_t a, std::size_t b) { return bs[a].firstStep < bs[b].firstStep; });
  std::stable_sort(byLast.begin(), byLast.end(),
                   [&](std::size_t a, std::size_t b) { return bs[a].lastStep < bs[b].lastStep; });
  std::map<std::int64_t, std::size_t> live;  // offset -> buffer; live buffers never share an offset
  std::size_t nextGone = 0;
  for (std::size_t i : byFirst) {
    const ArenaInterval& b = bs[i];
    while (nextGone < byLast.size() && bs[byLast[nextGone]].lastStep < b.firstStep) {
      const std::size_t j = byLast[nextGone++];
      auto it = live.find(bs[j].offset);
      if (it != live.end() && it->second == j) live.erase(it);
    }
    auto next = live.lower_bound(b.offset);
    if (next != live.end() && next->first < b.offset + b.size) return std::pair{i, next->second};
    if (next != live.begin()) {
      auto prev = std::prev(next);
      if (prev->first + bs[prev->second].size > b.offset) return std::pair{i, prev->second};
    }
    live.emplace(b.offset, i);
  }
  return std::nullopt;
}

}  // namespace gradc::ir
