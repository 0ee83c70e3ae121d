// The planner's objectives (passes/plan/objective.h): least-recompute (the default order) and
// least-peak, each under an optional recompute cap, and what an infeasible budget carries.
#include <doctest/doctest.h>

#include <memory>
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
  o.remat = passes::RematStrategy::Auto;
  o.plan.budgetBytes = budget;
  o.plan.objective = Objective{goal, cap};
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
  o.remat = passes::RematStrategy::Sqrt;  // its one plan recomputes
  Expected<TrainingPlan> p = passes::chooseTrainingPlan(forward, o);
  REQUIRE_FALSE(p.ok());
  CHECK(p.error().kind == ErrorKind::User);
  CHECK(p.error().message.find("no sqrt plan recomputes at most 0%") != std::string::npos);
}

// A table where a FLOP costs 1 ns, a byte 0.1 ns and a call 10 us: recompute and micro-batch
// calls both cost time.
std::shared_ptr<const ir::CostTable> testCosts() {
  auto t = std::make_shared<ir::CostTable>();
  t->fallback = ir::OpCost{1e-5, 1e-9, 1e-10};
  return t;
}

TEST_CASE("objective: throughput chooses the fitting plan with the least predicted step time") {
  const ir::Graph forward = testing::compileBundledModel(
      "gpt-mini", {{"batch", "4"}, {"seq", "32"}, {"d_model", "64"}, {"heads", "2"}, {"layers", "4"}});
  const std::shared_ptr<const ir::CostTable> costs = testCosts();
  auto plan = [&](PlanGoal goal, std::optional<std::int64_t> budget, int microBatches) {
    TrainingPlanOptions o = withObjective(goal, std::nullopt, budget);
    o.plan.objective.costs = costs;
    o.microBatches = microBatches;
    Expected<TrainingPlan> p = passes::chooseTrainingPlan(forward, o);
    REQUIRE_MESSAGE(p.ok(), p.error().message);
    return std::move(*p);
  };
  // Without a budget: nothing recomputed, one micro-batch, its time the table's sum.
  const TrainingPlan fastest = plan(PlanGoal::Throughput, std::nullopt, 0);
  CHECK(fastest.report.recomputeFlops == 0);
  CHECK(fastest.report.config.microBatches == 1);
  CHECK(fastest.report.predictedStepSeconds == doctest::Approx(costs->stepSeconds(fastest.graph)));
  // Under budgets between the least peak and the step as it is, over micro-batch counts too:
  // the choice predicts no more time than least-recompute's choice, measured with the same table.
  const TrainingPlan least = plan(PlanGoal::LeastPeak, std::nullopt, 1);
  for (double f : {0.25, 0.5, 0.75}) {
    const std::int64_t budget =
        least.report.predictedPeakBytes +
        static_cast<std::int64_t>(f * static_cast<double>(fastest.report.predictedPeakBytes - least.report.predictedPeakBytes));
    CAPTURE(budget);
    const TrainingPlan quick = plan(PlanGoal::Throughput, budget, 0);
    const TrainingPlan cheap = plan(PlanGoal::LeastRecompute, budget, 0);
    CHECK(quick.report.predictedPeakBytes <= budget);
    CHECK(quick.report.predictedStepSeconds == doctest::Approx(costs->stepSeconds(quick.graph)));
    CHECK(quick.report.predictedStepSeconds <= costs->stepSeconds(cheap.graph) * (1 + 1e-9));
    // With the loss fused at any chunk count the planner may take: never slower than a fixed
    // count that fits (each chunk is a call, each count its own workspace).
    TrainingPlanOptions fused = withObjective(PlanGoal::Throughput, std::nullopt, budget);
    fused.plan.objective.costs = costs;
    fused.lossChunks = passes::LossChunking{};  // auto
    Expected<TrainingPlan> any = passes::chooseTrainingPlan(forward, fused);
    REQUIRE_MESSAGE(any.ok(), any.error().message);
    for (int k : {1, 4, 16}) {
      fused.lossChunks = passes::LossChunking{passes::LossChunking::Mode::Fixed, k};
      Expected<TrainingPlan> fixed = passes::chooseTrainingPlan(forward, fused);
      if (!fixed) continue;
      CAPTURE(k);
      CHECK(any->report.predictedStepSeconds <= fixed->report.predictedStepSeconds * (1 + 1e-9));
      CHECK(fixed->report.predictedStepSeconds == doctest::Approx(costs->stepSeconds(fixed->graph)));
    }
  }
  // The objective needs its table.
  TrainingPlanOptions bare = withObjective(PlanGoal::Throughput, std::nullopt, std::nullopt);
  Expected<TrainingPlan> refused = passes::chooseTrainingPlan(forward, bare);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("cost table") != std::string::npos);
  CHECK(passes::parseObjective("throughput", -1).value().goal == PlanGoal::Throughput);
}

}  // namespace
}  // namespace gradc
