#include "passes/plan/objective.h"

#include <cstdio>
#include <limits>

namespace gradc::passes {

bool Objective::precedes(const PlanCost& a, const PlanCost& b) {
  if (a.recomputeFlops != b.recomputeFlops) return a.recomputeFlops < b.recomputeFlops;
  const PlanConfig& x = a.config;
  const PlanConfig& y = b.config;
  if (x.microBatches != y.microBatches) return x.microBatches < y.microBatches;
  if (x.zero != y.zero) return x.zero < y.zero;
  if (x.keptGroups != y.keptGroups) {  // the same below stage 3
    auto kept = [](int groups) { return groups < 0 ? std::numeric_limits<int>::max() : groups; };
    return kept(x.keptGroups) > kept(y.keptGroups);
  }
  if (x.lossChunks != y.lossChunks) return x.lossChunks < y.lossChunks;
  return a.strategyRank < b.strategyRank;
}

bool Objective::before(const PlanCost& a, const PlanCost& b) const {
  if (goal == PlanGoal::Throughput && a.seconds != b.seconds) return a.seconds < b.seconds;
  return precedes(a, b);
}

bool Objective::admits(const PlanCost& cost, std::int64_t forwardFlops) const {
  if (!maxRecomputePercent || cost.recomputeFlops == 0) return true;
  return 100.0 * static_cast<double>(cost.recomputeFlops) <=
         *maxRecomputePercent * static_cast<double>(forwardFlops);
}

Status Objective::check() const {
  if (goal == PlanGoal::Throughput && !costs) return Error{"the throughput objective needs a step-time cost table"};
  return Status::success();
}

std::string Objective::describe() const {
  std::string out(planGoalName(goal));
  if (maxRecomputePercent) {
    char cap[64];
    std::snprintf(cap, sizeof cap, ", at most %g%% recompute", *maxRecomputePercent);
    out += cap;
  }
  return out;
}

std::string_view planGoalName(PlanGoal goal) {
  switch (goal) {
    case PlanGoal::LeastRecompute: return "least-recompute";
    case PlanGoal::LeastPeak: return "least-peak";
    case PlanGoal::Throughput: return "throughput";
  }
  return "?";
}

Expected<Objective> parseObjective(std::string_view goal, double maxRecomputePercent) {
  Objective o;
  if (goal == "least-recompute") o.goal = PlanGoal::LeastRecompute;
  else if (goal == "least-peak") o.goal = PlanGoal::LeastPeak;
  else if (goal == "throughput") o.goal = PlanGoal::Throughput;
  else return Error{"--objective: expected least-recompute, least-peak or throughput, got '" + std::string(goal) + "'"};
  if (maxRecomputePercent >= 0) o.maxRecomputePercent = maxRecomputePercent;
  return o;
}

}  // namespace gradc::passes
