// Schedule: the final execution order of a joint forward + backward + optimizer graph.
//
// Algorithm: a greedy list scheduler over the dependence graph, two rounds, the better kept.
//   Dependences: data edges (producer -> user); for side-effect nodes that update
//   parameters in place (optimizer steps: every Param operand counts as written), order edges
//   between the writer and every other node that touches the same storage (views of it
//   included), in the direction of the input order: readers before the update stay before it,
//   readers after it stay after it; and order edges between the nodes that issue collectives
//   (OpInfo::issuesCollective), in the order of their seq attribute, which every rank follows;
//   and one from the collective issued last before a reduce_scatter_wait in the input order to
//   it, so the eager rule (the wait frees a bucket) cannot pull it up to its own start and end
//   the overlap of the reduction with the backward.
//   Round "eager": among the ready nodes, run first (lowest input index first) a node that
//     frees memory: it is the last remaining user of some buffer, and frees at least the bytes
//     of the fresh results it allocates. Otherwise run the ready node that came first in the
//     input order, so a node whose result is used late is not hoisted.
//   Round "input order": only that last rule, which reproduces the input order.
//   In both rounds, lazy nodes do not hold up their users: recompute nodes (phase recompute,
//   inserted by the remat pass) and tiny nodes (results of at most 64 bytes, no workspace, no
//   side effects: a learning rate, a constant 1.0, a norm). Once a lazy node's own inputs
//   exist, its users count it as done; it runs right before the first of its users that is
//   picked, in input order with the other lazy nodes that user needs. A tiny node may also run
//   on its own turn; a recompute node never does. So recomputation is never hoisted earlier
//   than its first use, and an optimizer update can run -- freeing its gradient -- as soon as
//   its gradient exists, pulling the learning-rate node along.
//   Variants of the eager order: every run of recompute nodes (right before the node it
//     feeds) moved one, then two places earlier, past pure nodes it does not depend on (no
//     side effects, no collectives; two places only when one lowered the peak): recomputing before an independent node that allocates
//     frees the run's temporaries before that node's results exist (on a 4-layer MLP this
//     lowers the smallest feasible step by 12%, matching the exact MILP's placement).
//   Each round's order is measured with the liveness sweep (passes/memory/lifetimes.h), as its peak
//   over the step graph (passes/memory/step_graph.h: the dependence and storage facts the rounds
//   read); the best eager variant is kept unless its predicted peak is higher than the input
//   order's.
//
// Complexity: O((nodes + uses) log nodes) per round (binary heaps keyed by input index; each
// buffer's remaining-user count drops to one at most once), plus up to four O(nodes + uses)
// peak evaluations.
//
// Invariants of the result: a topological order of the data edges; collectives issued in seq
// order; every optimizer update
// after every other use of the storage it updates (and before any use the input order put
// after it); between a recompute node and its first user only other recompute nodes (and tiny
// nodes) that the same user needs; predicted peak <= the input order's (with its recompute
// nodes at their first use, where the remat pass puts them); deterministic -- every
// choice depends on input indices and byte counts, never on pointers.
#pragma once

#include <cstdint>
#include <vector>

#include "passes/memory/liveness.h"
#include "passes/pass.h"
#include "passes/memory/step_graph.h"

namespace gradc::passes {

class Schedule final : public Pass {
 public:
  std::string_view name() const override { return "schedule"; }
  Expected<bool> run(ir::Graph& graph) override;
};

// The order the pass would choose, without changing the graph (tests, planners).
std::vector<const ir::Node*> computeSchedule(const ir::Graph& graph);

// The order the pass would choose and the liveness over it: what the memory plan of this graph
// will hold at each step once scheduled. Every budget decision is taken on this peak (the
// scheduled one), never on the input order's, which can be higher.
struct ScheduledLiveness {
  std::vector<const ir::Node*> order;
  Liveness liveness;
};
ScheduledLiveness scheduleAndAnalyze(const ir::Graph& graph);
// With the storage model computed before.
ScheduledLiveness scheduleAndAnalyze(const ir::Graph& graph, const StorageModel& storage);
// scheduleAndAnalyze(graph).liveness.peakBytes.
std::int64_t scheduledPeakBytes(const ir::Graph& graph);

// The same on a step graph (passes/memory/step_graph.h), for planners that measure a rewrite without
// making it: the order over node indices, and (peak != nullptr) its peak;
// scheduledPeak(buildStepGraph(StepFacts(g, storage))).bytes == scheduledPeakBytes(g).
std::vector<int> scheduleOrder(const StepGraph& graph, StepPeak* peak = nullptr);
StepPeak scheduledPeak(const StepGraph& graph);

}  // namespace gradc::passes
