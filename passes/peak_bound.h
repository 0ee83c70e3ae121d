// A lower bound on the peak of every execution order of a graph, cheap enough to prune budget
// decisions before scheduling (passes/remat.cpp).
//
// Bound at a node v: whatever order the schedule pass picks, while v runs these are alive:
//   - the persistent bytes (parameters, optimizer state, inputs);
//   - v's workspace (op table + hidden copies, passes/liveness.h) and v's own results;
//   - every other storage buffer (a result that owns its storage; views join their owner's)
//     whose producer is an ancestor of v and that is read by v or a descendant of v, or is a
//     graph output (kept to the end): its producer must have run before v and its reader after.
// Ancestors and descendants follow data edges only; the order edges the scheduler adds
// (in-place updates, collectives) only remove orders, so the bound stays a bound.
//
// Algorithm: one backward walk from v (ancestors) and one forward walk (descendants), then one
// pass over the nodes. O(nodes + uses) per node bounded.
//
// Invariant: peakLowerBound(g, s, v) <= analyzeLiveness(g, s, order).peakBytes for every valid
// topological order (tests/passes/schedule_test.cpp checks it against the scheduled and the
// input orders).
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "passes/liveness.h"

namespace gradc::passes {

std::int64_t peakLowerBound(const ir::Graph& graph, const StorageModel& storage, const ir::Node& at);

}  // namespace gradc::passes
