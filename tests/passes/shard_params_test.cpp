// ZeRO stage 3 (passes/shard_params.h): each rank keeps only its shard of every bucket's
// parameters, every reader reads parameters gathered before it, kept or gathered again for the
// backward as asked, prefetched one group ahead, and the bytes this costs and saves. That
// stage 3 follows the replicated trajectory and measures its planned peak is checked end to end
// by tests/cli/shard_cli_test.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/parameter_init.h"
#include "ir/printer.h"
#include "ir/shard_layout.h"
#include "ir/verifier.h"
#include "passes/data_parallel.h"
#include "passes/micro_batch.h"
#include "passes/plan/training_planner.h"
#include "passes/shard_params.h"
#include "passes/shard_state.h"
#include "tests/bundled_model.h"
#include "tests/passes/rank_step.h"

using namespace gradc;
using testing::nodesOf;
using testing::rankStep;
using testing::shardedRank;

namespace {


std::map<const ir::Node*, size_t> positions(const ir::Graph& g) {
  std::map<const ir::Node*, size_t> at;
  for (size_t i = 0; i < g.numNodes(); ++i) at[g.nodes()[i].get()] = i;
  return at;
}

// The first node reading one of a wait's parameters.
size_t firstReader(const ir::Node* wait, std::map<const ir::Node*, size_t>& at) {
  size_t first = SIZE_MAX;
  for (size_t r = 0; r < wait->numResults(); ++r)
    for (const ir::Use& u : wait->result(r)->uses()) first = std::min(first, at[u.user]);
  return first;
}

}  // namespace

TEST_CASE("stage 3: every rank keeps exactly its shard of each bucket's parameters, and reads them gathered") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  const ir::Graph replicated = rankStep(forward, shardedRank(3, 0, 0));
  std::int64_t learned = 0;
  for (const auto& p : replicated.params())
    if (ir::isLearned(*p)) learned += p->type().numel();
  const int world = 3;
  std::vector<std::string> order0;
  for (int rank = 0; rank < world; ++rank) {
    CAPTURE(rank);
    const ir::Graph g = rankStep(forward, shardedRank(world, rank, 3));
    REQUIRE(static_cast<bool>(ir::verify(g)));
    CHECK(passes::shardStageOf(g) == passes::ZeroStage::Parameters);
    CHECK(nodesOf(g, "all_gather_params").empty());
    const auto updates = nodesOf(g, "adamw_shard_step");
    REQUIRE(updates.size() > 2);
    std::int64_t covered = 0;
    for (const ir::Node* u : updates) {
      CHECK(ir::getBool(u->attrs(), "param_shard").value_or(false));
      CHECK(u->numResults() == 0);
      const ir::Value* shard = u->operand(0);
      const std::vector<std::int64_t> numels = *ir::getIntList(u->attrs(), "part_numels");
      std::int64_t total = 0;
      for (std::int64_t n : numels) total += n;
      const std::int64_t s = ir::shardSize(total, world);
      CHECK(shard->kind() == ir::ValueKind::Param);
      CHECK(shard->type().shape == ir::Shape{s});
      CHECK(*ir::getInt(shard->attrs(), "shard_offset") == rank * s);
      CHECK(*ir::getString(shard->attrs(), "shard_prefix") == "");
      CHECK(ir::decodeParameterInits(*ir::getString(shard->attrs(), "shard_init"))->size() == numels.size());
      covered += total;
    }
    CHECK(covered == learned);
    // The rank's learned parameters are its shards: 1/N of the model, padding aside.
    std::int64_t held = 0;
    for (const auto& p : g.params())
      if (ir::isLearned(*p)) {
        CHECK(ir::getString(p->attrs(), "init") == "shard");
        held += p->type().numel();
      }
    CHECK(held * world - learned < world * static_cast<std::int64_t>(updates.size()));
    // Every gathered parameter is read after its wait, and each wait after its start.
    auto at = positions(g);
    const auto waits = nodesOf(g, "all_gather_wait");
    CHECK(waits.size() == 2 * updates.size());  // the forward's and the backward's
    for (const ir::Node* w : waits) {
      CHECK(at[w->operand(0)->producer()] < at[w]);
      CHECK(firstReader(w, at) > at[w]);
      CHECK(*ir::getInt(w->attrs(), "seq") == *ir::getInt(w->operand(0)->producer()->attrs(), "seq"));
    }
    // Every rank issues the same collectives in the same order, numbered in program order.
    std::vector<std::string> order;
    std::int64_t lastSeq = -1;
    for (const auto& n : g.nodes())
      if (n->op().issuesCollective) {
        order.push_back(std::string(n->opName()) + "(" + std::to_string(ir::getInt(n->attrs(), "bucket").value_or(-1)) + ")");
        CHECK(*ir::getInt(n->attrs(), "seq") > lastSeq);
        lastSeq = *ir::getInt(n->attrs(), "seq");
      }
    if (rank == 0) order0 = order;
    else CHECK(order == order0);
  }
}

TEST_CASE("stage 3: a regathered bucket's forward parameters die before its backward; a kept one's live on") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  const ir::Graph regather = rankStep(forward, shardedRank(2, 0, 3, 0));
  const ir::Graph keep = rankStep(forward, shardedRank(2, 0, 3, -1));
  const ir::Graph keepOne = rankStep(forward, shardedRank(2, 0, 3, 1));
  const size_t buckets = nodesOf(regather, "adamw_shard_step").size();
  CHECK(nodesOf(regather, "all_gather_start").size() == 2 * buckets);
  CHECK(nodesOf(keep, "all_gather_start").size() == buckets);
  CHECK(nodesOf(keepOne, "all_gather_start").size() == 2 * buckets - 1);
  // Regathered: no forward gather is read by the backward.
  for (const ir::Node* w : nodesOf(regather, "all_gather_wait")) {
    bool forwardRead = false, otherRead = false;
    for (size_t r = 0; r < w->numResults(); ++r)
      for (const ir::Use& u : w->result(r)->uses()) (u.user->phase() == ir::Phase::fwd ? forwardRead : otherRead) = true;
    CHECK_FALSE((forwardRead && otherRead));
  }
  // Kept parameters cost memory and save an all-gather per bucket.
  const passes::CommunicationVolume sentRegather = passes::communicationVolume(regather);
  const passes::CommunicationVolume sentKeep = passes::communicationVolume(keep);
  CHECK(sentKeep.allGatherBytes * 2 == sentRegather.allGatherBytes);
  CHECK(sentKeep.reduceScatterBytes == sentRegather.reduceScatterBytes);
}

TEST_CASE("stage 3 prefetch: each bucket's all-gather starts before the previous bucket's parameters are read") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  for (bool prefetch : {true, false}) {
    CAPTURE(prefetch);
    const ir::Graph g = rankStep(forward, shardedRank(2, 1, 3, 0, prefetch));
    auto at = positions(g);
    const auto waits = nodesOf(g, "all_gather_wait");
    REQUIRE(waits.size() > 2);
    // Within the forward and within the backward; the scheduler may still run a node that frees
    // more than it allocates before a start (at most once here).
    int ahead = 0, pairs = 0;
    auto forwardRead = [&](const ir::Node* w) { return g.nodes()[firstReader(w, at)]->phase() == ir::Phase::fwd; };
    for (size_t i = 1; i < waits.size(); ++i) {
      if (forwardRead(waits[i]) != forwardRead(waits[i - 1])) continue;
      ++pairs;
      ahead += at[waits[i]->operand(0)->producer()] < firstReader(waits[i - 1], at);
    }
    REQUIRE(pairs >= static_cast<int>(waits.size()) - 2);
    if (prefetch) CHECK(ahead >= pairs - 1);
    else CHECK(ahead == 0);
  }
}

TEST_CASE("stage 3 keeps a quarter of stage 2's parameter bytes on 4 ranks; auto takes it only when 2 does not fit") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  std::vector<std::int64_t> params, peak;
  for (int stage : {2, 3}) {
    Expected<ir::Graph> local = passes::partitionForward(forward, shardedRank(4, 0, stage));
    REQUIRE(local.ok());
    passes::TrainingPlanOptions options;
    options.dataParallel = shardedRank(4, 0, stage);
    Expected<passes::TrainingPlan> c = passes::chooseTrainingPlan(*local, options);
    REQUIRE_MESSAGE(c.ok(), c.error().message);
    std::int64_t bytes = 0;
    for (const auto& p : c->graph.params())
      if (ir::isLearned(*p)) bytes += p->type().bytes();
    params.push_back(bytes);
    peak.push_back(c->report.predictedPeakBytes);
  }
  CHECK(params[1] * 4 <= params[0] + 4 * 4 * 16);  // padding: under one element per rank and bucket
  CHECK(params[1] * 4 >= params[0]);
  CHECK(peak[1] < peak[0]);
  // auto under stage 3's peak but over stage 2's: stage 3.
  Expected<ir::Graph> local = passes::partitionForward(forward, shardedRank(4, 0, -1));
  REQUIRE(local.ok());
  passes::TrainingPlanOptions options;
  options.dataParallel = shardedRank(4, 0, -1);
  options.lossChunks.mode = passes::LossChunking::Mode::Off;
  options.plan.budgetBytes = peak[1];
  Expected<passes::TrainingPlan> chosen = passes::chooseTrainingPlan(*local, options);
  REQUIRE_MESSAGE(chosen.ok(), chosen.error().message);
  CHECK(chosen->report.config.zero == passes::ZeroStage::Parameters);
  options.plan.budgetBytes = peak[0];
  CHECK(passes::chooseTrainingPlan(*local, options).value().report.config.zero <= passes::ZeroStage::Gradients);
}

TEST_CASE("parameter initialisers round-trip through a shard's shard_init") {
  const std::vector<ir::ParameterInit> inits{{"uniform", 0.1}, {"normal", 0.02}, {"ones", 0}, {"zeros", 0},
                                             {"uniform", 1.0 / 3.0}};
  Expected<std::vector<ir::ParameterInit>> back = ir::decodeParameterInits(ir::encodeParameterInits(inits));
  REQUIRE(back.ok());
  REQUIRE(back->size() == inits.size());
  for (size_t i = 0; i < inits.size(); ++i) {
    CHECK(back->at(i).kind == inits[i].kind);
    CHECK(back->at(i).value == inits[i].value);  // exact: 17 significant digits
  }
  CHECK_FALSE(ir::decodeParameterInits("uniform").ok());
  CHECK_FALSE(ir::decodeParameterInits("normal x").ok());
  CHECK_FALSE(ir::decodeParameterInits("ones 1").ok());
  CHECK_FALSE(ir::decodeParameterInits("gaussian 1").ok());
}

TEST_CASE("stage 3 under a budget: the most buckets kept that fit, every one gathered again when none does") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  auto planWith = [&](int keep, std::optional<std::int64_t> budget) {
    Expected<ir::Graph> local = passes::partitionForward(forward, shardedRank(2, 0, 3, keep));
    REQUIRE(local.ok());
    passes::TrainingPlanOptions options;
    options.dataParallel = shardedRank(2, 0, 3, keep);
    options.lossChunks.mode = passes::LossChunking::Mode::Off;
    options.remat = passes::RematStrategy::None;
    options.plan.budgetBytes = budget;
    return passes::chooseTrainingPlan(*local, options);
  };
  Expected<passes::TrainingPlan> all = planWith(-1, std::nullopt);
  REQUIRE(all.ok());
  CHECK(nodesOf(all->graph, "all_gather_start").size() == nodesOf(all->graph, "adamw_shard_step").size());
  // The counts tried, in order: every group kept, the last G/2, G/4, ..., 1, none.
  const int groups = passes::forwardGatheredGroups(all->graph);
  REQUIRE(groups >= 4);
  std::vector<int> tried{-1};
  for (int kept = groups / 2; kept >= 1; kept /= 2) tried.push_back(kept);
  tried.push_back(0);
  std::vector<std::int64_t> peak;
  for (int keep : tried) peak.push_back(planWith(keep, std::nullopt).value().report.predictedPeakBytes);
  REQUIRE(peak.back() < peak.front());
  REQUIRE(peak[1] < peak.front());
  // Under each count's own peak as the budget, the first count in that order that fits.
  for (size_t i = 0; i < tried.size(); ++i) {
    CAPTURE(tried[i]);
    size_t first = 0;
    while (peak[first] > peak[i]) ++first;
    Expected<passes::TrainingPlan> p = planWith(passes::kKeepGatheredAuto, peak[i]);
    REQUIRE_MESSAGE(p.ok(), p.error().message);
    CHECK(p->decision.config().keptGroups == tried[first]);
    CHECK(p->report.predictedPeakBytes == peak[first]);
    CHECK(p->report.recomputeFlops == 0);
    const std::string named = tried[first] < 0    ? "every bucket's parameters kept"
                              : tried[first] == 0 ? "every bucket's parameters gathered again"
                              : tried[first] == 1 ? "the last bucket the forward gathers kept"
                                                  : "the last " + std::to_string(tried[first]) + " buckets the forward gathers kept";
    CHECK(p->report.plan.find(named) != std::string::npos);
  }
  // Below the least of them nothing fits without recompute (none is allowed): refused.
  const std::int64_t least = *std::min_element(peak.begin(), peak.end());
  Expected<passes::TrainingPlan> refused = planWith(passes::kKeepGatheredAuto, least - 1);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("the smallest feasible budget is") != std::string::npos);
}

TEST_CASE("stage 3 evaluation: the forward reads the training step's shards, gathered once per bucket") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  const int world = 2;
  for (const bool prefetch : {true, false}) {
    CAPTURE(prefetch);
    const ir::Graph step = rankStep(forward, shardedRank(world, 1, 3, 0, prefetch));
    Expected<std::int64_t> batch = passes::batchSize(forward);
    REQUIRE(batch.ok());
    Expected<ir::Graph> eval = passes::rebatchForward(forward, *batch, world, "evaluation");
    REQUIRE(eval.ok());
    std::set<std::string> replicated;
    for (const auto& p : eval->params()) replicated.insert(p->name());
    REQUIRE(static_cast<bool>(passes::gatherShardsForEvaluation(*eval, step)));
    REQUIRE(static_cast<bool>(ir::verify(*eval)));
    // The step's parameter shards, by name, type and attributes; none of the bucket's parameters.
    const auto updates = nodesOf(step, "adamw_shard_step");
    const auto starts = nodesOf(*eval, "all_gather_start");
    REQUIRE(starts.size() == updates.size());
    for (const ir::Node* u : updates) {
      const ir::Value* shard = u->operand(0);
      const ir::Value* mine = eval->findNamed(shard->name());
      REQUIRE(mine != nullptr);
      CHECK(mine->kind() == ir::ValueKind::Param);
      CHECK(mine->type().shape == shard->type().shape);
      CHECK(ir::toString(mine->attrs()) == ir::toString(shard->attrs()));
      const std::string of = *ir::getString(shard->attrs(), "shard_of");
      for (const auto& p : eval->params()) CHECK(of.find(p->name()) == std::string::npos);
    }
    for (const auto& p : eval->params()) CHECK((replicated.count(p->name()) == 0) == (p->name().rfind("param.bucket", 0) == 0));
    // One gather per bucket, its wait before its readers, numbered in program order; with
    // prefetch a bucket's start comes before the previous bucket's first reader.
    auto at = positions(*eval);
    std::int64_t seq = 0;
    size_t prefetched = 0;
    const auto waits = nodesOf(*eval, "all_gather_wait");
    REQUIRE(waits.size() == starts.size());
    for (size_t i = 0; i < waits.size(); ++i) {
      const ir::Node* start = waits[i]->operand(0)->producer();
      CHECK(ir::getInt(start->attrs(), "seq") == seq++);
      CHECK(at[start] < at[waits[i]]);
      CHECK(firstReader(waits[i], at) > at[waits[i]]);
      if (i > 0 && at[start] < firstReader(waits[i - 1], at)) ++prefetched;
    }
    CHECK(prefetched == (prefetch ? waits.size() - 1 : 0));
  }
  // A step without parameter shards leaves the evaluation as it is.
  const ir::Graph stage2 = rankStep(forward, shardedRank(world, 1, 2));
  Expected<ir::Graph> eval = passes::rebatchForward(forward, 12, world, "evaluation");
  REQUIRE(eval.ok());
  const std::string before = ir::printGraph(*eval);
  REQUIRE(static_cast<bool>(passes::gatherShardsForEvaluation(*eval, stage2)));
  CHECK(ir::printGraph(*eval) == before);
}

TEST_CASE("stage 3 refuses the gather placement (rank 0's step differs, so would its gathers); auto leaves it out") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  for (const int shard : {3, -1}) {
    CAPTURE(shard);
    passes::DataParallelOptions dp = shardedRank(2, 0, shard);
    dp.placement = passes::LossPlacement::Gather;
    Expected<ir::Graph> local = passes::partitionForward(forward, dp);
    REQUIRE(local.ok());
    passes::TrainingPlanOptions options;
    options.dataParallel = dp;
    options.plan.budgetBytes = std::int64_t{1} << 30;
    Expected<passes::ConfigSpace> space = passes::configSpace(*local, options);
    if (shard == 3) {
      REQUIRE_FALSE(space.ok());
      CHECK(space.error().message.find("use --loss-placement local") != std::string::npos);
    } else {
      REQUIRE(space.ok());
      CHECK(space->zeroStages == std::vector<passes::ZeroStage>{passes::ZeroStage::Replicated, passes::ZeroStage::OptimizerState,
                                                                passes::ZeroStage::Gradients});
    }
  }
}

TEST_CASE("stage 3's gathers described for the training log") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", testing::kTinyShardedGpt);
  const ir::Graph all = rankStep(forward, shardedRank(2, 0, 3, -1));
  const int groups = passes::forwardGatheredGroups(all);
  REQUIRE(groups > 2);
  CHECK(passes::describeGathers(all) == "every bucket kept from the forward");
  CHECK(passes::describeGathers(rankStep(forward, shardedRank(2, 0, 3, 0))) ==
        "every bucket gathered again for the backward");
  CHECK(passes::describeGathers(rankStep(forward, shardedRank(2, 0, 3, 2))) ==
        "the last 2 of " + std::to_string(groups) + " buckets kept from the forward, " + std::to_string(groups - 2) +
            " gathered again for the backward");
  // Under recompute, the gathers the recompute plan adds are counted too.
  passes::TrainingPlanOptions sqrt;
  sqrt.remat = passes::RematStrategy::Sqrt;
  sqrt.plan.budgetBytes = std::nullopt;
  const ir::Graph recomputed = rankStep(forward, shardedRank(2, 0, 3, 0), sqrt);
  size_t regathers = 0;
  for (const ir::Node* n : nodesOf(recomputed, "all_gather_wait")) regathers += n->phase() == ir::Phase::recompute;
  REQUIRE(regathers > 1);
  CHECK(passes::describeGathers(recomputed) == "every bucket gathered again for the backward, " +
                                                   std::to_string(regathers) + " gathers again for recompute");
}
