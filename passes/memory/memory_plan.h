// Memory plan: every byte a training step holds on a device, when, and where.
//
// Input: a graph in schedule order (after the schedule pass). Stages:
//   1. Liveness (passes/memory/liveness.h): one buffer per storage (views share their owner's), each
//      alive over an inclusive interval of steps; a workspace buffer per step that needs one
//      (op-table workspace and hidden copies of strided operands), alive during that step only.
//      The timeline is the live bytes per step; the predicted peak is its maximum (at least the
//      persistent bytes: parameters, optimizer state, inputs).
//   2. Offsets in one arena, each a multiple of kBufferAlignment (64 bytes: a cache line, an
//      AVX-512 vector, what ATen's allocator and cudaMalloc give). Persistent buffers first, from offset 0, in declaration order;
//      the others by two placements, the smaller arena kept:
//      - greedy by size (offline, as TFLite's and XLA's heap planners): buffers by decreasing
//        size, each in the smallest gap between the already placed buffers that overlap it in
//        time, else on top of them;
//      - best-fit sweep (online, as a caching allocator would): at step s the buffers first
//        alive at s are placed, largest first, in the smallest free gap, else at the arena's
//        end; after step s the buffers last alive at s are freed, coalescing gaps.
//      Fragmentation = arena bytes / peak bytes (1.0 is perfect; the peak is a lower bound).
//   3. Verification: no two buffers alive at the same step share a byte (verifyNoOverlap).
//
// Complexity: liveness and the sweep are O((nodes + uses) log buffers); greedy by size is
// O(buffers x buffers overlapping in time), run up to kGreedyBySizeLimit buffers.
//
// Invariants: arena_bytes >= peak_bytes; peak_bytes == max(timeline) when there are steps; the
// plan is deterministic (buffer order = liveness order, every tie broken by it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/memory_plan.h"
#include "ir/status.h"

namespace gradc::passes {

inline constexpr std::int64_t kBufferAlignment = 64;

// The plan's data types (ir/memory_plan.h), by their planner's names.
using ir::BufferKind;
using ir::MemoryPlan;
using ir::PlannedBuffer;
using ir::PlannedStep;
using ir::RankBuffer;
using ir::RankPlan;

// Plans a graph in its current (schedule) order.
MemoryPlan planMemory(const ir::Graph& graph);

// Ok when no two buffers alive at a common step share a byte and every buffer lies inside the
// arena; otherwise an Error naming both buffers. O(buffers log buffers).
Status verifyNoOverlap(const MemoryPlan& plan);

// Offsets for arbitrary intervals (the planner's stage 2, exposed for tests): sizes and
// inclusive [first, last] steps in, offsets out; returns the arena size. Buffers with
// first == -1 are persistent: placed first, from offset 0, in order.
struct Interval {
  std::int64_t size = 0;
  int first = 0;
  int last = 0;
};
// The better (smaller arena; ties: the sweep) of the two placements below; the greedy one only
// up to kGreedyBySizeLimit buffers, beyond which its quadratic time would dominate planning.
std::int64_t assignOffsets(const std::vector<Interval>& intervals, std::vector<std::int64_t>& offsets);
// Online: a sweep over steps simulating a best-fit allocator with coalescing.
// O(n log n).
std::int64_t assignOffsetsBestFit(const std::vector<Interval>& intervals, std::vector<std::int64_t>& offsets);
// Offline: buffers by decreasing size, each in the smallest gap left by the already placed
// buffers that overlap it in time (else on top of them). O(n^2) worst case.
std::int64_t assignOffsetsBySize(const std::vector<Interval>& intervals, std::vector<std::int64_t>& offsets);
inline constexpr size_t kGreedyBySizeLimit = 40000;

}  // namespace gradc::passes
