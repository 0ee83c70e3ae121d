// The training plan's selection under a byte budget: which candidate step (micro-batch count,
// ZeRO stage, loss chunking) and which of its recompute proposals, so that the predicted peak
// fits the budget at the least cost the objective (passes/plan/objective.h) names. The budget
// covers everything the memory model (passes/memory/) counts: parameters, gradients, optimizer
// state, inputs, activations, recompute temporaries and kernel workspaces.
//
// Algorithm:
//   1. remat::analyze: episodes, the chain of each episode, backward uses
//      (passes/remat_strategies.h).
//   2. remat::candidates: the proposals of the requested strategy (auto: of all strategies),
//      each with its exact recompute FLOPs (remat::planRewrite, no graph change). With a
//      budget, auto's include the free-recompute path
//      (passes/remat_free_path.h), which is measured to be made: it depends on the graph only,
//      so the proposal set still does not depend on the budget.
//   3. Order: recompute FLOPs ascending, then micro-batch count, then loss chunks (unfused
//      first: fusing trades the LM head's large matrix products for memory; then the fewest
//      chunks), then a fixed strategy rank (none, selective, chain, sqrt, memory-poor), then
//      proposal index. Neither the proposals nor this order depend on the budget. A fused
//      graph's proposals are measured at each of its chunk counts.
//   4. With a budget: the first proposal in that order whose scheduled peak (the schedule
//      pass's order over the step graph the rewrite would make, passes/memory/step_graph.h) is
//      <= the budget:
//      the peak the emitted memory plan will have, not the input order's (which the schedule
//      pass can lower by a sixth). Scheduling is the costly part, so each proposal first gets
//      two cheap facts: its program-order peak (an upper bound: the schedule never does worse
//      than its input order) and a lower bound no order can beat (passes/memory/peak_bound.h, at the
//      program-order peak's node). A proposal whose lower bound exceeds the budget is skipped
//      unscheduled; one whose bounds straddle the budget is scheduled; a fit is confirmed on
//      its scheduled peak before it is chosen. Proposals are measured lazily, so a generous
//      budget measures one.
//      Without a budget: none and auto keep everything; sqrt, memory-poor and selective apply
//      their one plan; chain takes the least recompute within 5% of its smallest peak. No
//      plan peaks below the graph's persistent bytes, so a proposal within 5% of those
//      settles it once the proposals before it peak above its own peak plus 5%: then the
//      proposals recomputing more (on a deep chain, millions of clones) are never measured.
//   5. The chosen rewrite is applied for good, and reported.
//
// Guarantees:
//   - The contract, on scheduled peaks: (1) a budget >= the peak of any proposal is accepted;
//     (2) when nothing fits, the smallest feasible budget named is the least scheduled peak
//     over all proposals (searched in lower-bound order, stopping at the first bound above the
//     best peak found), and that many bytes are accepted; (3) recompute FLOPs never grow with
//     the budget (the order does not depend on it); (4) the predicted peak never exceeds the
//     budget and is the memory plan's peak (the training pipeline checks it).
//   - Monotone: a smaller budget never gives a larger peak. Proof: with a fixed proposal set
//     P and a fixed order, choice(B) = the first p in P with peak(p) <= B. For B1 < B2, if
//     choice(B2) has peak <= B1 it is also choice(B1); otherwise peak(choice(B2)) > B1 >=
//     peak(choice(B1)).
//   - Results are bit-identical to the graph without remat: recompute nodes are clones of
//     forward nodes with the same attributes (dropout keeps its rng key) reading identical
//     values (tests/runtime/remat_equivalence_test.cpp).
//   - When nothing fits, the Error names the smallest feasible budget (the least peak over
//     every proposal) and what dominates it: parameters + optimizer state, or one node's
//     working set (operands, results and kernel workspace).
// Complexity: analysis O(nodes + uses); the chain solver O(64^3 x 1024 / 6); each proposal
// O(nodes + recompute nodes) to plan and to measure. Planning a 1,000-block chain takes under
// a second on two cores (bench/plan_bench, bench/README.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/plan/objective.h"
#include "passes/remat_strategies.h"
#include "passes/rewrite_by_ids.h"

namespace gradc::passes {

struct TrainingPlanReport {
  RematStrategy requested = RematStrategy::None;
  RematStrategy chosen = RematStrategy::None;  // the strategy of the applied plan
  std::string plan;                            // one line: what the plan does
  std::string proposal;                        // the applied proposal's description (Candidate)
  PlanConfig config;                           // the chosen configuration (lossChunks: as applied)
  std::int64_t budgetBytes = -1;  // -1: no budget
  std::int64_t predictedPeakBytes = 0;
  std::int64_t peakWithoutRematBytes = 0;  // the same step without recompute (first graph given)
  std::int64_t savedBytes = 0;             // peakWithoutRematBytes - predictedPeakBytes
  std::int64_t forwardFlops = 0;           // one forward of the whole batch
  std::int64_t recomputeFlops = 0;  // remat's clones
  int recomputeNodes = 0;
  int chainStages = 0;  // stages the chain solver saw (first episode)
  int candidates = 0;   // proposals considered
  int evaluated = 0;    // proposals whose program-order peak and lower bound were measured
  int scheduled = 0;    // proposals also scheduled (the bounds decided the others)
  double predictedStepSeconds = -1;  // with a cost table (the throughput objective); -1: none

  // Recompute FLOPs as a percentage of one forward.
  double recomputePercent() const {
    return forwardFlops > 0 ? 100.0 * static_cast<double>(recomputeFlops) / static_cast<double>(forwardFlops) : 0.0;
  }
};

// The same training step built with different micro-batch counts (passes/micro_batch.h), with
// or without the fused loss (passes/fuse_loss.h).
struct PlanCandidate {
  ir::Graph* graph;
  PlanConfig config;  // how the graph was built (its lossChunks: any count > 0 when fused)
  // A graph with a fused loss: the chunk counts to choose from (empty: as the graph has it).
  std::vector<int> lossChunks;
};
struct PlanSelection {
  size_t graph = 0;  // index of the graph the chosen plan was applied to
  TrainingPlanReport report;
  // The applied rewrite in ids, and the structure of the graph it was applied to (before it):
  // what another rank built the same way applies instead of searching (passes/rewrite_by_ids.h).
  remat::RewriteByIds rewrite;
  std::uint64_t structure = 0;
};
// Chooses over the proposals of every graph together and applies the choice to its graph; the
// other graphs are left unchanged. Order: recompute FLOPs, then micro-batch count, then the
// ZeRO stage (sharding costs no FLOPs, only communication: the least that fits; under stage 3
// every group kept before any gathered again), then loss
// chunks (unfused first, then the fewest), then the strategy rank above.
// `strategy` names the proposals considered (auto: every strategy's).
Expected<PlanSelection> selectTrainingPlan(std::span<const PlanCandidate> graphs, RematStrategy strategy,
                                           const PlanOptions& options);

}  // namespace gradc::passes
