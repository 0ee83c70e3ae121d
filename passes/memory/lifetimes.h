// The liveness sweep: in a given order of a step graph's nodes, when each storage group is
// allocated and freed, the bytes live at each step, and the peak. The one implementation of
// "what is live when": the memory planner's buffers (analyzeLiveness, passes/memory/liveness.h),
// the schedule pass comparing orders and the remat planner measuring proposals (stepPeak) all
// read it; the peak lower bound (passes/memory/peak_bound.h) reasons over the same step graph.
//
// Model (the executor's; docs/memory.md):
//  - One node per step, in `order`. Persistent storage (StorageRole::residency, in the step
//    graph's persistentBytes) is alive at every step.
//  - A group is allocated at the step of the node that makes it, while that node's operands are
//    still alive, and freed after the last step that reads it through any alias; a graph
//    output's group (pinned) lives to the last step; a group nobody reads is freed at once.
//  - The live bytes of a step: persistent bytes, the groups alive at it, and the workspace of
//    the node running at it. The peak is the largest, at least the persistent bytes; its step
//    is the first that reaches it.
//
// Complexity: O(nodes + groups + group reads) time, O(nodes + groups) space.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "passes/memory/step_graph.h"

namespace gradc::passes {

struct StepPeak {
  std::int64_t bytes = 0;
  int step = 0;
};

struct LiveSweep {
  std::vector<int> groupFirst;  // per group: the step allocating it
  std::vector<int> groupLast;   // per group: the last step it is alive at (inclusive)
  std::vector<std::int64_t> liveBytes;  // per step: live bytes, workspace included
  StepPeak peak;
};

// The full sweep over `order` (a topological order of node indices).
LiveSweep liveSweep(const StepGraph& graph, std::span<const int> order);
// The same sweep's peak alone, without keeping per-group or per-step arrays.
StepPeak stepPeak(const StepGraph& graph, std::span<const int> order);
// The identity order 0 .. n-1 (the graph's program order).
std::vector<int> programOrder(const StepGraph& graph);

}  // namespace gradc::passes
