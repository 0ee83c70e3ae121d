// A lower bound on the peak of every execution order of a graph, cheap enough to prune budget
// decisions before scheduling (passes/plan/proposal_set.h).
//
// Bound at a node v: whatever order the schedule pass picks, while v runs these are alive:
//   - the persistent bytes (parameters, optimizer state, inputs);
//   - v's workspace (op table + hidden copies, passes/memory/storage.h) and v's own results;
//   - every other storage buffer (a result that owns its storage; views join their owner's)
//     whose producer is an ancestor of v and that is read by v or a descendant of v, or is a
//     graph output (kept to the end): its producer must have run before v and its reader after.
// Ancestors and descendants follow data edges only; the order edges the scheduler adds
// (in-place updates, collectives) only remove orders, so the bound stays a bound.
//
// Algorithm: on the step graph (passes/memory/step_graph.h), one backward walk from v (ancestors) and
// one forward walk (descendants), then one pass over the nodes. O(nodes + uses) per node bounded; peakLowerBoundNear adds one pass for
// the longest paths.
//
// Invariant: peakLowerBound(g, s, v) <= analyzeLiveness(g, s, order).peakBytes for every valid
// topological order (tests/passes/budget_contract_test.cpp checks it at every node, against
// the live bytes of the scheduled and the input orders).
#pragma once

#include <cstdint>
#include <span>

#include "ir/graph.h"
#include "passes/memory/storage.h"
#include "passes/memory/step_graph.h"

namespace gradc::passes {

std::int64_t peakLowerBound(const ir::Graph& graph, const StorageModel& storage, const ir::Node& at);

// The largest bound over the node at `step` of `order` and the `spineNodes` nodes nearest it
// in that order that lie on a longest dependence path (the spine of a training step: the
// forward chain, then the backward chain of hidden-state gradients). A node off the spine
// (a weight-gradient accumulation, say) has few descendants, so its bound is weak: the spine
// nodes around it give the bound its strength.
std::int64_t peakLowerBoundNear(const ir::Graph& graph, const StorageModel& storage,
                                std::span<const ir::Node* const> order, int step, int spineNodes = 2);

// The same over a step graph's node indices (a rewrite measured without making it).
std::int64_t peakLowerBound(const StepGraph& graph, int node);
std::int64_t peakLowerBoundNear(const StepGraph& graph, std::span<const int> order, int step, int spineNodes = 2);

}  // namespace gradc::passes
