// What the training-plan search optimises: an Objective orders the candidate plans (each a
// configuration -- micro-batches, ZeRO stage, fused-loss chunks -- with a recompute proposal)
// and says which of those that fit the budget is chosen.
//
//   least-recompute (default): the first plan, in the total order below, whose step fits.
//       Order: recompute FLOPs, then micro-batch count (micro-batching costs no FLOPs, only
//       smaller kernels), then ZeRO stage (communication only), then loss chunks (unfused
//       first, then the fewest), then the strategy rank (none, selective, chain, sqrt,
//       memory-poor). Without a budget each strategy applies its own plan (passes/remat.h).
//   least-peak: the plan with the least scheduled peak (ties: the earlier in that order); with
//       a budget it must fit, or the budget is infeasible.
// Either takes a recompute cap (--max-recompute PCT, of one forward): plans that recompute more
// are not candidates, so "the least memory at most 30% extra compute buys" is one request.
//
// Invariant the search relies on: under least-recompute every plan without recompute precedes
// every plan with, by micro-batch count, so the first configuration whose step fits as it is
// ends the search (firstFitEndsSearch). A new objective says whether it has that property.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::passes {

// One candidate plan as the objective sees it (its peak is measured when asked, lazily).
struct PlanCost {
  std::int64_t recomputeFlops = 0;
  int microBatches = 1;
  int shardStage = 0;
  int lossChunks = 0;  // 0: the loss is not fused
  int strategyRank = 0;
};

enum class PlanGoal : std::uint8_t { LeastRecompute, LeastPeak };

struct Objective {
  PlanGoal goal = PlanGoal::LeastRecompute;
  std::optional<double> maxRecomputePercent;  // of one forward; nullopt: no cap

  // The total order above (a strict weak order; the search keeps ties in proposal order).
  static bool precedes(const PlanCost& a, const PlanCost& b);
  // Whether a plan is a candidate at all: within the recompute cap.
  bool admits(const PlanCost& cost, std::int64_t forwardFlops) const;
  bool firstFitEndsSearch() const { return goal == PlanGoal::LeastRecompute; }
  // "least-peak, at most 30% recompute": for summaries and refusals.
  std::string describe() const;
};

std::string_view planGoalName(PlanGoal goal);
// --objective NAME and --max-recompute PCT (negative: none).
Expected<Objective> parseObjective(std::string_view goal, double maxRecomputePercent);

}  // namespace gradc::passes
