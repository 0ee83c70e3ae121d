// Memory liveness of a scheduled graph: every buffer a step holds, from which step to which, the
// bytes live at each step and the peak -- what the memory planner places (memory_plan.h), what
// `gradc inspect` prints and what the runtime's planned-vs-measured report compares against.
//
// It is the liveness sweep (lifetimes.h) over the graph's step graph (step_graph.h) with the
// storage model's facts (storage.h) attached: one buffer per persistent value (storageRoleOf)
// and one per storage group, each with the values that alias it. There is no second model:
// every peak the schedule pass and the remat planner compare is the same sweep's.
//
// Complexity: O(nodes + uses + rank) time and space; the storage model (order independent) is
// computed once and can be reused for several orders.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/graph.h"
#include "passes/id_index.h"
#include "passes/memory/lifetimes.h"
#include "passes/memory/step_graph.h"
#include "passes/memory/storage.h"

namespace gradc::passes {

struct Buffer {
  BufferKind kind;
  Residency residency = Residency::Step;
  std::int64_t bytes = 0;
  int firstStep = 0;  // step (node index) that allocates it; 0 for persistent buffers
  int lastStep = 0;   // last step at which it is alive (inclusive); the last step if persistent
  const ir::Value* value = nullptr;  // the value that owns the storage (a param, input or result)
  std::vector<const ir::Value*> aliases;  // view results sharing the storage
};

struct Liveness {
  std::vector<Buffer> buffers;               // persistent ones first, then results in order
  std::vector<std::int64_t> liveBytes;       // per step: bytes alive during that step, workspace included
  std::vector<std::int64_t> workspaceBytes;  // per step (op table workspace + hidden copies)
  std::vector<std::int64_t> copyBytes;       // per step: the hidden-copy part of workspaceBytes
  std::int64_t peakBytes = 0;
  int peakStep = 0;
  std::int64_t persistentBytes = 0;  // alive throughout (persistentValues)
  // Buffer index of every value that has storage (views map to their owner's buffer); -1: none.
  IdIndex<ir::Value> bufferOf;
};

// Liveness over the graph's program order.
Liveness analyzeLiveness(const ir::Graph& graph);
// Liveness over another order of the graph's nodes (a permutation of graph.nodes() that is a
// valid topological order), with a storage model computed before.
Liveness analyzeLiveness(const ir::Graph& graph, const StorageModel& storage, std::span<const ir::Node* const> order);
// The same with the graph's step graph built before (buildStepGraph(StepFacts(graph, storage)),
// no rewrite) and the order as its node indices.
Liveness analyzeLiveness(const ir::Graph& graph, const StorageModel& storage, const StepGraph& step,
                         std::span<const int> order);

}  // namespace gradc::passes
