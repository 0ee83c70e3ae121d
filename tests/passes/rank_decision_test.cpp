// Decided once for all ranks (passes/plan/training_planner.h, passes/rewrite_by_ids.h): another
// rank applies rank 0's decision to its own shard and gets the step its own search would have
// chosen; a rank whose graph is not built like rank 0's searches instead.
#include <doctest/doctest.h>

#include <string>

#include "ir/printer.h"
#include "passes/data_parallel.h"
#include "passes/plan/training_planner.h"
#include "passes/remat_strategies.h"
#include "passes/rewrite_by_ids.h"
#include "tests/bundled_model.h"

namespace gradc {
namespace {

using passes::TrainingStepResult;

const ir::Graph& model() {
  static const ir::Graph g = testing::compileBundledModel(
      "gpt-mini", {{"batch", "8"}, {"seq", "32"}, {"d_model", "64"}, {"heads", "2"}, {"layers", "4"}});
  return g;
}

// Under `onlyRecompute` one configuration (one micro-batch, the loss unfused): a budget is met by
// recompute alone. Otherwise micro-batch counts and the fused loss are searched too.
passes::TrainingPlanOptions rankOptions(int rank, passes::LossPlacement placement, int shard,
                                        std::optional<std::int64_t> budget, bool onlyRecompute) {
  passes::TrainingPlanOptions o;
  passes::DataParallelOptions dp;
  dp.world = 2;
  dp.rank = rank;
  dp.placement = placement;
  dp.shard = static_cast<passes::ZeroStage>(shard);
  o.dataParallel = dp;
  o.plan.budgetBytes = budget;
  o.microBatches = budget && !onlyRecompute ? 0 : 1;
  if (onlyRecompute) o.lossChunks.mode = passes::LossChunking::Mode::Off;
  return o;
}

TrainingStepResult step(int rank, passes::LossPlacement placement, int shard, std::optional<std::int64_t> budget,
                        const passes::PlanDecision* decided = nullptr, bool onlyRecompute = false) {
  Expected<TrainingStepResult> r = passes::buildTrainingStepPipeline(
      model(), nullptr, rankOptions(rank, placement, shard, budget, onlyRecompute), {}, decided);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  return std::move(*r);
}

// A budget that needs recompute: a third of the way from the least peak to the peak as it is.
std::int64_t tightBudget(passes::LossPlacement placement) {
  const std::int64_t asIs = step(0, placement, 0, std::nullopt).plan.peakBytes;
  passes::TrainingPlanOptions o = rankOptions(0, placement, 0, std::nullopt, true);
  o.plan.objective.goal = passes::PlanGoal::LeastPeak;
  Expected<TrainingStepResult> least = passes::buildTrainingStepPipeline(model(), nullptr, o);
  REQUIRE(least.ok());
  return least->plan.peakBytes + (asIs - least->plan.peakBytes) / 3;
}

TEST_CASE("rank decision: rank 1 applies rank 0's decision and gets the step its own search chooses") {
  const auto local = passes::LossPlacement::Local;
  const std::int64_t budget = tightBudget(local);
  const TrainingStepResult rank0 = step(0, local, 0, budget, nullptr, true);
  REQUIRE(rank0.report.recomputeNodes > 0);  // the decision carries a rewrite
  CHECK_FALSE(rank0.appliedDecision);
  const TrainingStepResult applied = step(1, local, 0, budget, &rank0.decision, true);
  const TrainingStepResult searched = step(1, local, 0, budget, nullptr, true);
  CHECK(applied.appliedDecision);
  CHECK(applied.report.recomputeNodes == rank0.report.recomputeNodes);
  CHECK(applied.report.config == rank0.report.config);
  CHECK(ir::printGraph(applied.graph) == ir::printGraph(searched.graph));
  CHECK(applied.plan.peakBytes == searched.plan.peakBytes);
  CHECK(applied.plan.peakBytes <= budget);
  // The ranks differ in their dropout streams, which the clones copy from rank 1's nodes.
  CHECK(ir::printGraph(applied.graph) != ir::printGraph(rank0.graph));
}

TEST_CASE("rank decision: under ZeRO every rank applies the stage and the rewrite; each plan is its own") {
  const auto local = passes::LossPlacement::Local;
  const std::int64_t budget = tightBudget(local);
  const TrainingStepResult rank0 = step(0, local, 2, budget);
  const TrainingStepResult rank1 = step(1, local, 2, budget, &rank0.decision);
  CHECK(rank1.appliedDecision);
  CHECK(rank1.report.config.microBatches == rank0.report.config.microBatches);
  CHECK(rank1.report.config.lossChunks == rank0.report.config.lossChunks);
  CHECK(rank1.report.recomputeNodes == rank0.report.recomputeNodes);
  CHECK(rank1.report.config.zero == passes::ZeroStage::Gradients);
  CHECK(rank1.report.predictedPeakBytes == rank1.plan.peakBytes);
  CHECK(ir::printGraph(rank1.graph) == ir::printGraph(step(1, local, 2, budget).graph));
}

TEST_CASE("rank decision: under the gather placement rank 1's graph differs, so it searches") {
  const auto gather = passes::LossPlacement::Gather;
  const TrainingStepResult rank0 = step(0, gather, 0, std::nullopt);
  const TrainingStepResult rank1 = step(1, gather, 0, std::nullopt, &rank0.decision);
  CHECK_FALSE(rank1.appliedDecision);
  CHECK(passes::remat::structureOf(rank1.graph) != passes::remat::structureOf(rank0.graph));
}

TEST_CASE("rank decision: a rewrite bound to a graph without its nodes is an internal error") {
  passes::remat::RewriteByIds plan;
  plan.clones.push_back({/*of=*/1000000, /*before=*/0, /*first=*/0});
  Expected<passes::RewritePlan> bound = passes::remat::bindRewrite(plan, model());
  REQUIRE_FALSE(bound.ok());
  CHECK(bound.error().kind == ErrorKind::Internal);
}

TEST_CASE("rank decision: the structure ignores attributes and sees types and wiring") {
  ir::Graph a = passes::remat::cloneGraph(model());
  const std::uint64_t before = passes::remat::structureOf(a);
  a.attrs()["seed"] = std::int64_t{12345};
  for (const auto& n : a.nodes())
    if (n->opName() == "dropout") n->attrs()["rng"] = std::int64_t{99};
  CHECK(passes::remat::structureOf(a) == before);
  // Swapping two operands of one type changes the wiring and nothing else.
  for (const auto& n : a.nodes())
    if (n->numOperands() >= 2 && n->operand(0) != n->operand(1) && n->operand(0)->type() == n->operand(1)->type()) {
      ir::Value* first = n->operand(0);
      n->setOperand(0, n->operand(1));
      n->setOperand(1, first);
      break;
    }
  CHECK(passes::remat::structureOf(a) != before);
}

}  // namespace
}  // namespace gradc
