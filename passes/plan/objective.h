// What the training-plan search optimises: an Objective orders the candidate plans (each a
// configuration -- micro-batches, ZeRO stage, fused-loss chunks -- with a recompute proposal)
// and says which of those that fit the budget is chosen.
//
//   least-recompute (default): the first plan, in the total order below, whose step fits.
//       Order: recompute FLOPs, then micro-batch count (micro-batching costs no FLOPs, only
//       smaller kernels), then ZeRO stage (communication only; under stage 3 the more
//       parameter groups kept from the forward, the fewer gathered again), then loss chunks (unfused
//       first, then the fewest), then the strategy rank (none, selective, chain, sqrt,
//       memory-poor). Without a budget each strategy applies its own plan (passes/remat.h).
//   least-peak: the plan with the least scheduled peak (ties: the earlier in that order); with
//       a budget it must fit, or the budget is infeasible.
//   throughput: the plan with the least predicted step time (ir/cost_table.h: the configuration's
//       step summed node by node, plus its recompute clones) whose step fits (ties: the order
//       above). The fastest plan need not be the least-recompute one: more micro-batches cost
//       calls, sharding costs communication, and a larger chunk count costs per-call time.
// Either takes a recompute cap (--max-recompute PCT, of one forward): plans that recompute more
// are not candidates, so "the least memory at most 30% extra compute buys" is one request.
//
// Invariant the search relies on: under least-recompute every plan without recompute precedes
// every plan with, by micro-batch count, so the first configuration whose step fits as it is
// ends the search (firstFitEndsSearch). A new objective says whether it has that property.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ir/cost_table.h"
#include "ir/status.h"
#include "passes/plan/plan_config.h"

namespace gradc::passes {

// One candidate plan as the objective sees it (its peak is measured when asked, lazily).
struct PlanCost {
  PlanConfig config;  // its lossChunks: the chunk count this plan is measured at
  std::int64_t recomputeFlops = 0;
  int strategyRank = 0;
  double seconds = 0;  // predicted step time (throughput objective only)
};

enum class PlanGoal : std::uint8_t { LeastRecompute, LeastPeak, Throughput };

struct Objective {
  PlanGoal goal = PlanGoal::LeastRecompute;
  std::optional<double> maxRecomputePercent;  // of one forward; nullopt: no cap
  std::shared_ptr<const ir::CostTable> costs;  // throughput: the step-time model (required)

  // The total order above (a strict weak order; the search keeps ties in proposal order).
  static bool precedes(const PlanCost& a, const PlanCost& b);
  // The order the search takes plans in: throughput by predicted seconds first, then precedes.
  bool before(const PlanCost& a, const PlanCost& b) const;
  // Whether a plan is a candidate at all: within the recompute cap.
  bool admits(const PlanCost& cost, std::int64_t forwardFlops) const;
  bool firstFitEndsSearch() const { return goal == PlanGoal::LeastRecompute; }
  // The throughput objective without its table is a caller's error.
  Status check() const;
  // "least-peak, at most 30% recompute": for summaries and refusals.
  std::string describe() const;
};

std::string_view planGoalName(PlanGoal goal);
// --objective NAME and --max-recompute PCT (negative: none).
Expected<Objective> parseObjective(std::string_view goal, double maxRecomputePercent);

// What the plan is asked to fit, and which of the plans that fit it takes: the same for every
// recompute strategy (passes/remat.h) and every configuration the search builds.
struct PlanOptions {
  std::optional<std::int64_t> budgetBytes;  // bytes per device; nullopt: no budget
  // Device memory the step holds beside its plan for the whole run (on CUDA, cuBLAS's
  // workspaces), counted against budgetBytes: plans are sized to planBudget().
  std::int64_t reserveBytes = 0;
  Objective objective;

  std::int64_t planBudget() const { return budgetBytes.value_or(0) - reserveBytes; }
};

}  // namespace gradc::passes
