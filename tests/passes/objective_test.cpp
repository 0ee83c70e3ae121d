// The planner's objectives (passes/plan/objective.h): least-recompute (the default order) and
// least-peak, each under an optional recompute cap, and what an infeasible budget carries.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "passes/plan/objective.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

namespace gradc {
namespace {

using passes::Objective;
using passes::PlanGoal;
using passes::TrainingPlan;
using passes::TrainingPlanOptions;

TrainingPlanOptions withObjective(PlanGoal goal, std::optional<double> cap, std::optional<std::int64_t> budget) {
  TrainingPlanOptions o;
  o.remat.strategy = passes::RematStrategy::Auto;
  o.remat.budgetBytes = budget;
  o.remat.objective = Objective{goal, cap};
  // One configuration with or without a budget (with one, auto would add fused-loss steps).
  o.lossChunks.mode = passes::LossChunking::Mode::Off;
  return o;
}

TEST_CASE("objective: least-peak reaches the least memory, under a recompute cap the least that cap buys") {
  const ir::Graph forward = testing::compileBundledModel(
      "gpt-mini", {{"batch", "4"}, {"seq", "32"}, {"d_model", "64"}, {"heads", "2"}, {"layers", "4"}});
  auto plan = [&](PlanGoal goal, std::optional<double> cap, std::optional<std::int64_t> budget) {
    Expected<TrainingPlan> p = passes::chooseTrainingPlan(forward, withObjective(goal, cap, budget));
    REQUIRE_MESSAGE(p.ok(), p.error().message);
    return std::move(*p);
  };
  const TrainingPlan asIs = plan(PlanGoal::LeastRecompute, std::nullopt, std::nullopt);
  CHECK(asIs.report.recomputeFlops == 0);
  const TrainingPlan least = plan(PlanGoal::LeastPeak, std::nullopt, std::nullopt);
  CHECK(least.report.predictedPeakBytes < asIs.report.predictedPeakBytes);
  CHECK(least.report.recomputeFlops > 0);
  const TrainingPlan capped = plan(PlanGoal::LeastPeak, 10.0, std::nullopt);
  CHECK(capped.report.recomputePercent() <= 10.0);
  CHECK(capped.report.predictedPeakBytes >= least.report.predictedPeakBytes);
  CHECK(capped.report.predictedPeakBytes <= asIs.report.predictedPeakBytes);

  // Under a budget both fit it; least-recompute never recomputes more than least-peak needs to.
  const std::int64_t budget = capped.report.predictedPeakBytes;
  const TrainingPlan cheap = plan(PlanGoal::LeastRecompute, std::nullopt, budget);
  const TrainingPlan small = plan(PlanGoal::LeastPeak, std::nullopt, budget);
  CHECK(cheap.report.predictedPeakBytes <= budget);
  CHECK(small.report.predictedPeakBytes == least.report.predictedPeakBytes);
  CHECK(cheap.report.recomputeFlops <= capped.report.recomputeFlops);

  // Below the least peak the cap allows: infeasible, the smallest feasible budget as a number.
  Expected<TrainingPlan> refused =
      passes::chooseTrainingPlan(forward, withObjective(PlanGoal::LeastPeak, 10.0, capped.report.predictedPeakBytes - 1));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().kind == ErrorKind::InfeasibleBudget);
  CHECK(refused.error().smallestFeasibleBytes == capped.report.predictedPeakBytes);
  CHECK(refused.error().message.find("at most 10% recompute") != std::string::npos);
}

TEST_CASE("objective: parsing and a cap no plan meets") {
  CHECK(passes::parseObjective("least-peak", 5).value().maxRecomputePercent == 5.0);
  CHECK_FALSE(passes::parseObjective("least-peak", -1).value().maxRecomputePercent.has_value());
  CHECK_FALSE(passes::parseObjective("fastest", -1).ok());
  const ir::Graph forward = testing::compileBundledModel("mlp");
  TrainingPlanOptions o = withObjective(PlanGoal::LeastRecompute, 0.0, std::nullopt);
  o.remat.strategy = passes::RematStrategy::Sqrt;  // its one plan recomputes
  Expected<TrainingPlan> p = passes::chooseTrainingPlan(forward, o);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().kind == ErrorKind::User);
  CHECK(p.error().message.find("no sqrt plan recomputes at most 0%") != std::string::npos);
}

}  // namespace
}  // namespace gradc
