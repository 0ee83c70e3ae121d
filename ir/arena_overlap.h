// The overlap test of arena plans, shared by the planner (which proves its own plans) and the
// runtime (which checks the plan an artifact brings before placing a tensor): two buffers
// alive at a common step must not share a byte.
//
// Sweep over steps: buffers enter at their first step and leave after their last; the live
// ones are kept in a map by offset, where a newcomer is compared with its two neighbours only
// (the live set never overlaps, so the neighbours are the only candidates). O(n log n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

namespace gradc::ir {

struct ArenaInterval {
  std::int64_t offset = 0;
  std::int64_t size = 0;  // bytes; an empty buffer overlaps nothing
  int firstStep = 0;      // inclusive
  int lastStep = 0;       // inclusive
};

// Whether [offset, offset + size) lies inside an arena of `arenaBytes`, without overflowing on
// hostile values (an offset near 2^63).
bool insideArena(const ArenaInterval& b, std::int64_t arenaBytes);

// The first pair of indices (newcomer, live buffer) that are alive at a common step and share
// a byte, or nullopt. Every interval must be inside the arena (insideArena).
std::optional<std::pair<std::size_t, std::size_t>> findArenaOverlap(std::span<const ArenaInterval> buffers);

}  // namespace gradc::ir
