// ZeRO sharding (passes/shard_state.h): each rank's state holds exactly its shard of every
// bucket, the updates and collectives that replace the replicated ones, the order the schedule
// keeps (a reduce-scatter overlaps the next bucket's backward), the stage the budget chooses, and
// the bytes each stage communicates. That sharded ranks follow the replicated trajectory is
// checked end to end by tests/cli/shard_cli_test.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ir/shard_layout.h"
#include "ir/verifier.h"
#include "passes/budget.h"
#include "passes/data_parallel.h"
#include "passes/fuse_loss.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "passes/shard_state.h"
#include "tests/bundled_model.h"
#include "tests/passes/rank_step.h"

using namespace gradc;
using testing::nodesOf;
using testing::rankStep;

namespace {

const testing::DimOverrides& kTinyGpt = testing::kTinyShardedGpt;
using testing::shardedRank;

Expected<passes::TrainingPlan> plan(const ir::Graph& forward, const passes::DataParallelOptions& o,
                                   passes::TrainingPlanOptions options = {}) {
  Expected<ir::Graph> local = passes::partitionForward(forward, o);
  REQUIRE_MESSAGE(local.ok(), local.error().message);
  options.dataParallel = o;
  return passes::chooseTrainingPlan(*local, options);
}

// "op(bucket)" of every collective-issuing node, in seq order: what the ranks must agree on.
std::vector<std::string> collectiveOrder(const ir::Graph& g) {
  std::map<std::int64_t, std::string> bySeq;
  for (const auto& n : g.nodes())
    if (n->op().issuesCollective)
      bySeq[*ir::getInt(n->attrs(), "seq")] =
          std::string(n->opName()) + "(" + std::to_string(ir::getInt(n->attrs(), "bucket").value_or(-1)) + ")";
  std::vector<std::string> out;
  for (auto& [seq, what] : bySeq) out.push_back(what);
  return out;
}

}  // namespace

TEST_CASE("every rank keeps exactly its shard of each bucket's optimizer state, and one update per bucket") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  const int world = 3;
  for (int stage : {1, 2}) {
    std::vector<std::string> order0;
    for (int rank = 0; rank < world; ++rank) {
      CAPTURE(stage);
      CAPTURE(rank);
      const ir::Graph g = rankStep(forward, shardedRank(world, rank, stage));
      CHECK(static_cast<bool>(ir::verify(g)));
      CHECK(passes::zeroStageNumber(passes::shardStageOf(g)) == stage);
      CHECK(nodesOf(g, "adamw_step").empty());
      const auto updates = nodesOf(g, "adamw_shard_step");
      const auto gathers = nodesOf(g, "all_gather_params");
      REQUIRE(updates.size() > 2);  // several buckets
      CHECK(gathers.size() == updates.size());
      // The bucket's elements, its shard size and this rank's offset.
      std::int64_t learned = 0;
      for (const auto& p : g.params())
        if (ir::isLearned(*p)) learned += p->type().numel();
      std::int64_t covered = 0;
      for (const ir::Node* u : updates) {
        const auto parts = static_cast<size_t>(*ir::getInt(u->attrs(), "parts"));
        std::int64_t total = 0;
        for (size_t i = 0; i < parts; ++i) total += u->operand(i)->type().numel();
        const std::int64_t s = ir::shardSize(total, world);
        CHECK(*ir::getInt(u->attrs(), "shard") == s);
        CHECK(*ir::getInt(u->attrs(), "offset") == rank * s);
        CHECK(s * world - total < world);  // padding below one element per rank
        CHECK(ir::getBool(u->attrs(), "grad_shard").value_or(false) == (stage == 2));
        for (size_t k = 0; k < 2; ++k) {  // m and v: [s], attributes for the checkpoint layout
          const ir::Value* m = u->operand(parts + (stage == 2 ? 1 : parts) + k);
          CHECK(m->type().shape == ir::Shape{s});
          CHECK(*ir::getInt(m->attrs(), "shard_offset") == rank * s);
          CHECK(*ir::getInt(m->attrs(), "shard_world") == world);
          CHECK(*ir::getString(m->attrs(), "shard_prefix") == (k == 0 ? "opt.adam_m." : "opt.adam_v."));
        }
        covered += total;
      }
      CHECK(covered == learned);  // every learned parameter is in exactly one bucket
      // No replicated optimizer state is left.
      for (const auto& p : g.params())
        if (!ir::isLearned(*p)) CHECK(ir::getString(p->attrs(), "shard_of").has_value());
      // Stage 2 reduce-scatters every bucket; the all-reduces left are the loss's.
      for (const ir::Node* n : nodesOf(g, "all_reduce_start"))
        CHECK((stage == 1 || *ir::getInt(n->attrs(), "bucket") < 0));
      CHECK(nodesOf(g, "reduce_scatter_start").size() == (stage == 2 ? updates.size() : 0));
      // Every rank issues the same collectives in the same order.
      if (rank == 0) order0 = collectiveOrder(g);
      else CHECK(collectiveOrder(g) == order0);
    }
  }
}

TEST_CASE("a reduce-scatter's wait runs after the next bucket's start, and each parameter's all-gather after its last use") {
  // The embedding's gradient (37 x 64 floats) is over the 8 KiB cap: its bucket is waited for at once.
  const ir::Graph forward = testing::compileBundledModel(
      "gpt-mini", {{"batch", "12"}, {"seq", "16"}, {"vocab", "37"}, {"d_model", "64"}, {"heads", "2"}, {"layers", "2"}});
  const ir::Graph g = rankStep(forward, shardedRank(2, 1, 2));
  std::map<const ir::Node*, size_t> at;
  for (size_t i = 0; i < g.numNodes(); ++i) at[g.nodes()[i].get()] = i;
  const auto starts = nodesOf(g, "reduce_scatter_start");
  const auto waits = nodesOf(g, "reduce_scatter_wait");
  REQUIRE(starts.size() == waits.size());
  REQUIRE(starts.size() > 2);
  int overlapped = 0, atOnce = 0;
  for (const ir::Node* w : waits) {
    const ir::Node* start = w->operand(0)->producer();
    const size_t k = static_cast<size_t>(std::find(starts.begin(), starts.end(), start) - starts.begin());
    REQUIRE(k < starts.size());
    // Overlapped with the next bucket's backward, unless the bucket is over the size cap.
    const bool overSize = start->result(0)->type().bytes() > shardedRank(2, 1, 2).bucketBytes;
    if (k + 1 < starts.size() && !overSize) CHECK(at[w] > at[starts[k + 1]]);
    if (k + 1 < starts.size() && overSize) CHECK(at[w] < at[starts[k + 1]]);
    (overSize ? atOnce : overlapped) += k + 1 < starts.size();
  }
  CHECK(overlapped > 0);
  CHECK(atOnce > 0);
  for (const ir::Node* gather : nodesOf(g, "all_gather_params"))
    for (size_t i = 0; i + 1 < gather->numOperands(); ++i)
      for (const ir::Use& u : gather->operand(i)->uses()) CHECK(at[u.user] <= at[gather]);
}

TEST_CASE("under a budget, auto picks the least stage that fits without recompute; the smallest budget spans all stages") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  std::vector<std::int64_t> peak;
  for (int stage : {0, 1, 2}) {
    Expected<passes::TrainingPlan> c = plan(forward, shardedRank(2, 0, stage));
    REQUIRE(c.ok());
    peak.push_back(c->report.predictedPeakBytes);
  }
  CHECK(peak[1] < peak[0]);
  CHECK(peak[2] <= peak[1]);
  passes::TrainingPlanOptions options;
  options.lossChunks.mode = passes::LossChunking::Mode::Off;  // the fused loss is another way to fit
  auto chosen = [&](std::int64_t budget) {
    options.plan.budgetBytes = budget;
    Expected<passes::TrainingPlan> c = plan(forward, shardedRank(2, 0, -1), options);
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    CHECK(c->report.predictedPeakBytes <= budget);
    return passes::zeroStageNumber(c->report.config.zero);
  };
  CHECK(chosen(peak[0]) == 0);
  CHECK(chosen(peak[0] - 1) >= 1);
  CHECK(chosen(peak[1]) == 1);
  // Nothing fits: the smallest feasible budget is over every stage, and no more than stage 2's alone.
  options.plan.budgetBytes = 1000;
  Expected<passes::TrainingPlan> none = plan(forward, shardedRank(2, 0, -1), options);
  REQUIRE_FALSE(none.ok());
  REQUIRE(none.error().kind == ErrorKind::InfeasibleBudget);
  const std::int64_t smallest = none.error().smallestFeasibleBytes;
  Expected<passes::TrainingPlan> stage2 = plan(forward, shardedRank(2, 0, 2), options);
  REQUIRE_FALSE(stage2.ok());
  REQUIRE(stage2.error().kind == ErrorKind::InfeasibleBudget);
  CHECK(smallest <= stage2.error().smallestFeasibleBytes);
  options.plan.budgetBytes = smallest;
  CHECK(plan(forward, shardedRank(2, 0, -1), options).ok());
}

TEST_CASE("bytes sent per step: stage 1 adds an all-gather to the all-reduce; stage 2 splits it in two halves") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  const int world = 4;
  std::vector<passes::CommunicationVolume> v;
  for (int stage : {0, 1, 2}) v.push_back(passes::communicationVolume(rankStep(forward, shardedRank(world, 0, stage))));
  CHECK(v[0].reduceScatterBytes == 0);
  CHECK(v[0].allGatherBytes == 0);
  CHECK(v[1].allReduceBytes == v[0].allReduceBytes);
  // The all-gather moves each bucket once (padded to a multiple of the ranks), half an all-reduce.
  CHECK(v[1].allGatherBytes >= v[0].allReduceBytes / 2 - 64);
  CHECK(v[1].allGatherBytes <= v[0].allReduceBytes / 2 + 64 * world);
  CHECK(v[2].reduceScatterBytes == v[1].allGatherBytes);
  CHECK(v[2].total() <= v[0].total() + 64 * world);
  CHECK(v[2].total() >= v[0].total() - 64 * world);
}

TEST_CASE("stage 0 and one device leave the step replicated") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  CHECK(passes::shardStageOf(rankStep(forward, shardedRank(2, 0, 0))) == passes::ZeroStage::Replicated);
  ir::Graph one = passes::chooseTrainingPlan(forward, {}).value().graph;
  passes::DataParallelOptions o = shardedRank(1, 0, 2);
  REQUIRE(passes::shardOptimizerState(one, o).ok());
  CHECK(passes::shardStageOf(one) == passes::ZeroStage::Replicated);
  CHECK_FALSE(nodesOf(one, "adamw_step").empty());
  CHECK_FALSE(passes::parseZeroStage("auto").value().has_value());
  CHECK(passes::parseZeroStage("3").value() == passes::ZeroStage::Parameters);
  CHECK(passes::parseZeroStage("0").value() == passes::ZeroStage::Replicated);
  CHECK_FALSE(passes::parseZeroStage("4").ok());
  CHECK_FALSE(passes::parseZeroStage("-1").ok());
}
