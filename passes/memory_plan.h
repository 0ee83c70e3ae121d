// Memory plan: every byte a training step holds on a device, when, and where.
//
// Input: a graph in schedule order (after the schedule pass). Stages:
//   1. Liveness (passes/liveness.h): one buffer per storage (views share their owner's), each
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
#include "ir/status.h"

namespace gradc::passes {

inline constexpr std::int64_t kBufferAlignment = 64;

struct PlannedBuffer {
  std::string name;       // as printed in IR: "%12", "%wte.weight"; workspaces: "workspace(%12)"
  std::string specName;   // the spec layer ("blocks.0.attn"); a parameter's layer; an input's name
  std::string kind;       // param|opt_state|input|activation|grad|optimizer|recompute|workspace|comm
  std::string type;       // "f32[16, 128, 256]"; empty for workspaces
  std::int64_t size = 0;  // bytes
  std::int64_t offset = 0;
  int firstStep = 0;  // inclusive
  int lastStep = 0;   // inclusive
  std::string producer;  // op of the producing node; empty for parameters and inputs
};

// What runs at one step of the schedule.
struct PlannedStep {
  std::string op;
  std::string phase;
  std::string specName;
};

// A buffer of a rank's plan alive at that rank's peak (the per-rank view of plan JSON).
struct RankBuffer {
  std::string name;
  std::string kind;
  std::string type;
  std::int64_t size = 0;
};

struct RankPlan {
  int rank = 0;
  std::int64_t peakBytes = 0;
  std::int64_t arenaBytes = 0;
  std::vector<RankBuffer> largestAtPeak;  // largest first; empty for a single-device plan
};

struct MemoryPlan {
  std::string model;
  std::optional<std::int64_t> budgetBytes;
  // Device memory reserved beside the plan for the device's libraries (passes/remat.h:
  // RematOptions::reserveBytes): peakBytes + reserveBytes fits budgetBytes.
  std::int64_t reserveBytes = 0;
  std::string strategy = "none";  // set by the caller (the remat strategy that produced the graph)
  std::int64_t peakBytes = 0;
  int peakStep = 0;
  std::int64_t arenaBytes = 0;
  std::int64_t persistentBytes = 0;
  std::int64_t forwardFlops = 0;
  std::int64_t backwardFlops = 0;
  std::int64_t optimizerFlops = 0;
  std::int64_t recomputeFlops = 0;
  // The fused LM-head loss's chunk count (passes/fuse_loss.h); 0: not fused.
  int lossChunks = 0;
  // Persistent buffers (parameters, optimizer state, inputs) first, then results in schedule
  // order, then workspaces in step order.
  std::vector<PlannedBuffer> buffers;
  std::vector<PlannedStep> steps;      // the schedule, one entry per step
  std::vector<std::int64_t> timeline;  // live bytes per step, workspace included
  std::vector<RankPlan> ranks;         // one entry per device

  // arena / peak (1.0 when there is nothing to place).
  double fragmentation() const;
  // Indices of the buffers alive at `step`, largest first (ties by index).
  std::vector<size_t> liveAt(int step) const;
};

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
