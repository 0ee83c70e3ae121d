// Data parallelism (passes/data_parallel.h): the per-rank forward graph (shards, loss scaling,
// dropout stream offsets, the gather placement), the gradient buckets, the collective order
// after scheduling, and the per-rank memory plans of both loss placements. Numerical equality
// of N ranks with one device is checked end to end by tests/cli/parallel_cli_test.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/data_parallel.h"
#include "frontend/spec.h"
#include "passes/memory/memory_plan.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/schedule.h"
#include "tests/bundled_model.h"
#include "tests/passes/rank_step.h"

using namespace gradc;
using testing::nodesOf;
using testing::rankStep;

namespace {

const testing::DimOverrides kTinyGpt = {{"batch", "8"}, {"seq", "16"}, {"vocab", "32"},
                                        {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}};

passes::DataParallelOptions dp(int world, int rank, passes::LossPlacement placement = passes::LossPlacement::Local) {
  passes::DataParallelOptions o;
  o.world = world;
  o.rank = rank;
  o.placement = placement;
  return o;
}


}  // namespace

TEST_CASE("partitionForward gives each rank its shard of the batch and scales the loss by 1/world") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  Expected<ir::Graph> local = passes::partitionForward(forward, dp(4, 1));
  REQUIRE(local.ok());
  CHECK(static_cast<bool>(ir::verify(*local)));
  for (const auto& in : local->inputs()) CHECK(in->type().shape[0] == 2);
  const ir::Node* loss = local->findOutput("loss")->producer();
  CHECK(loss->opName() == "scale");
  CHECK(*ir::getFloat(loss->attrs(), "factor") == doctest::Approx(0.25));
  CHECK(loss->operand(0)->producer()->opName() == "cross_entropy");
  CHECK(local->numNodes() == forward.numNodes() + 1);
  // Every node keeps its op; batch-carrying results lose 3/4 of their leading extent.
  for (size_t i = 0; i < forward.numNodes(); ++i) {
    CAPTURE(i);
    CHECK(local->nodes()[i]->opName() == forward.nodes()[i]->opName());
  }
}

TEST_CASE("an input marked batched: false is whole on every rank; the batched ones are sharded") {
  frontend::SpecResult r = frontend::compileSpec(
      "model: mix\ndims: {batch: 6, seq: 5, d: 4}\ninputs:\n  x: {shape: [batch, seq, d]}\n"
      "  mix: {shape: [seq, seq], batched: false}\n  y: {shape: [batch, seq, d]}\n"
      "layers:\n  - {op: matmul, inputs: [mix, x]}\n  - {op: linear, name: fc, out: d}\n"
      "loss: {op: mse, input: _, target: y}\n",
      "mix.yaml");
  REQUIRE(r.ok());
  Expected<ir::Graph> local = passes::partitionForward(*r.graph, dp(3, 1));
  REQUIRE_MESSAGE(local.ok(), local.error().message);
  CHECK(local->findNamed("x")->type().shape == ir::Shape{2, 5, 4});
  CHECK(local->findNamed("mix")->type().shape == ir::Shape{5, 5});
  CHECK_FALSE(local->findNamed("mix")->isBatchedInput());
}

TEST_CASE("world 1 leaves the forward graph as it is") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  Expected<ir::Graph> local = passes::partitionForward(forward, dp(1, 0));
  REQUIRE(local.ok());
  CHECK(ir::printGraph(*local) == ir::printGraph(forward));
  ir::Graph g = passes::chooseTrainingPlan(*local, {}).value().graph;
  ir::Graph copy = passes::chooseTrainingPlan(forward, {}).value().graph;
  CHECK(ir::printGraph(g) == ir::printGraph(copy));
  CHECK(nodesOf(g, "all_reduce_start").empty());
}

TEST_CASE("an uneven split and a bad rank and a graph partitioned twice are refused with clear messages") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", {{"batch", "10"}, {"seq", "16"}, {"vocab", "32"},
                                                                      {"d_model", "16"}, {"heads", "2"}, {"layers", "1"}});
  Expected<ir::Graph> uneven = passes::partitionForward(forward, dp(4, 0));
  REQUIRE_FALSE(uneven.ok());
  CHECK(uneven.error().message.find("batch of 10 examples does not split evenly over 4 devices") != std::string::npos);
  CHECK(uneven.error().message.find("8 or 12") != std::string::npos);
  Expected<ir::Graph> badRank = passes::partitionForward(forward, dp(2, 2));
  REQUIRE_FALSE(badRank.ok());
  CHECK(badRank.error().message.find("rank 2 is not in [0, 2)") != std::string::npos);
  Expected<ir::Graph> once = passes::partitionForward(forward, dp(2, 0, passes::LossPlacement::Gather));
  REQUIRE(once.ok());
  Expected<ir::Graph> twice = passes::partitionForward(*once, dp(2, 0));
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message.find("already partitioned") != std::string::npos);
  CHECK(passes::parseLossPlacement("scatter").error().message.find("expected local or gather") != std::string::npos);
}

TEST_CASE("dropout on rank r draws the rows r b to (r+1) b of the single-device stream") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  for (int rank : {0, 1, 3}) {
    CAPTURE(rank);
    ir::Graph local = passes::partitionForward(forward, dp(4, rank)).value();
    int dropouts = 0;
    for (size_t i = 0; i < local.numNodes(); ++i) {
      const ir::Node& n = *local.nodes()[i];
      if (n.opName() != "dropout") continue;
      ++dropouts;
      CHECK(ir::getInt(n.attrs(), "rng") == ir::getInt(forward.nodes()[i]->attrs(), "rng"));
      CHECK(ir::getInt(n.attrs(), "rng_offset").value_or(0) == rank * n.result(0)->type().numel());
    }
    CHECK(dropouts > 0);
  }
}

TEST_CASE("gradient buckets hold every gradient once in production order with 1 MiB first and then the bucket size") {
  // d_model 128: the 4 blocks' weights are 64 KiB - 256 KiB each, 3.2 MiB in all.
  const ir::Graph forward = testing::compileBundledModel(
      "gpt-mini", {{"batch", "4"}, {"seq", "16"}, {"d_model", "128"}, {"heads", "2"}, {"layers", "4"}});
  passes::DataParallelOptions o = dp(2, 0);
  o.bucketBytes = std::int64_t{1} << 20;
  o.firstBucketBytes = std::int64_t{256} << 10;
  ir::Graph g = rankStep(forward, o);
  CHECK(static_cast<bool>(ir::verify(g)));

  std::vector<passes::GradientBucket> buckets = passes::gradientBuckets(g);
  REQUIRE(buckets.size() >= 3);
  std::int64_t total = 0, tensors = 0;
  for (size_t k = 0; k < buckets.size(); ++k) {
    CAPTURE(k);
    CHECK(buckets[k].bucket == static_cast<std::int64_t>(k));
    if (k > 0) CHECK(buckets[k].seq == buckets[k - 1].seq + 1);
    const std::int64_t cap = k == 0 ? o.firstBucketBytes : o.bucketBytes;
    CHECK((buckets[k].bytes <= cap || buckets[k].tensors == 1));
    total += buckets[k].bytes;
    tensors += buckets[k].tensors;
  }
  std::int64_t paramBytes = 0, params = 0;
  for (const auto& p : g.params())
    if (ir::getString(p->attrs(), "role").value_or("") != "opt_state") {
      paramBytes += p->type().bytes();
      ++params;
    }
  CHECK(total == paramBytes);
  CHECK(tensors == params);

  // Each parameter's update reads a part of exactly one bucket, and the buckets are started in
  // the order of production: bucket 0 holds the head (produced first in the backward).
  std::set<const ir::Value*> reduced;
  for (const ir::Node* wait : nodesOf(g, "all_reduce_wait"))
    for (size_t r = 0; r < wait->numResults(); ++r) CHECK(reduced.insert(wait->result(r)).second);
  int updates = 0;
  for (const ir::Node* step : nodesOf(g, "adamw_step")) {
    ++updates;
    CHECK(reduced.count(step->operand(1)) == 1);
  }
  CHECK(updates == params);
  const ir::Node* first = nullptr;
  for (const ir::Node* s : nodesOf(g, "all_reduce_start"))
    if (ir::getInt(s->attrs(), "bucket") == 0) first = s;
  REQUIRE(first);
  bool hasHead = false;
  for (const ir::Value* v : first->operands()) hasHead |= v->producer()->specName() == "lm_head";
  CHECK(hasHead);
}

TEST_CASE("a tied weight is one gradient in one bucket: both uses are summed before it travels") {
  const ir::Graph forward = testing::compileBundledModel(
      "gpt2", {{"batch", "4"}, {"context", "16"}, {"seq", "16"}, {"vocab", "64"}, {"d_model", "32"}, {"heads", "4"},
               {"layers", "2"}});
  REQUIRE(forward.findNamed("wte.weight"));
  CHECK(forward.findNamed("lm_head.weight") == nullptr);
  ir::Graph g = rankStep(forward, dp(2, 0));
  std::int64_t entries = 0, tiedEntries = 0;
  for (const ir::Node* start : nodesOf(g, "all_reduce_start")) {
    if (ir::getInt(start->attrs(), "bucket").value_or(-1) < 0) continue;  // the loss's own reduction
    for (const ir::Value* v : start->operands()) {
      ++entries;
      // The gradient of wte.weight: the sum of the embedding's and the head's contributions.
      const ir::Node* p = v->producer();
      if (p->opName() == "add" && (p->specName() == "wte" || p->specName() == "lm_head")) ++tiedEntries;
    }
  }
  std::int64_t params = 0;
  for (const auto& p : g.params()) params += ir::getString(p->attrs(), "role").value_or("") != "opt_state";
  CHECK(entries == params);
  CHECK(tiedEntries == 1);
  int updatesOfTied = 0;
  for (const ir::Node* step : nodesOf(g, "adamw_step")) updatesOfTied += step->operand(0)->name() == "wte.weight";
  CHECK(updatesOfTied == 1);
}

TEST_CASE("after scheduling, every bucket starts before the backward ends and is waited on only by updates") {
  const ir::Graph forward = testing::compileBundledModel(
      "gpt-mini", {{"batch", "4"}, {"seq", "16"}, {"d_model", "128"}, {"heads", "2"}, {"layers", "4"}});
  passes::DataParallelOptions o = dp(2, 1);
  o.bucketBytes = std::int64_t{512} << 10;
  ir::Graph g = rankStep(forward, o);
  size_t lastBackward = 0;
  std::map<std::int64_t, size_t> startAt, waitAt;
  for (size_t i = 0; i < g.numNodes(); ++i) {
    const ir::Node& n = *g.nodes()[i];
    if (n.phase() == ir::Phase::bwd) lastBackward = i;
    const std::int64_t bucket = ir::getInt(n.attrs(), "bucket").value_or(-2);
    if (n.opName() == "all_reduce_start" && bucket >= 0) startAt[bucket] = i;
    if (n.opName() == "all_reduce_wait" && bucket >= 0) waitAt[bucket] = i;
  }
  REQUIRE(startAt.size() >= 3);
  // All but the last bucket start while backward nodes are still to run (communication overlaps).
  for (const auto& [bucket, at] : startAt)
    if (bucket + 1 < static_cast<std::int64_t>(startAt.size())) CHECK(at < lastBackward);
  for (const auto& [bucket, at] : waitAt) CHECK(at > lastBackward);
  // Issued in seq order.
  std::int64_t seq = -1;
  for (const auto& n : g.nodes())
    if (n->op().issuesCollective) {
      const std::int64_t s = *ir::getInt(n->attrs(), "seq");
      CHECK(s > seq);
      seq = s;
    }
}

TEST_CASE("gather placement: rank 0 gathers predictions and targets while the others send theirs and all issue the same collectives") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", kTinyGpt);
  ir::Graph root = rankStep(forward, dp(2, 0, passes::LossPlacement::Gather));
  ir::Graph other = rankStep(forward, dp(2, 1, passes::LossPlacement::Gather));
  REQUIRE(nodesOf(root, "gather").size() == 1);
  REQUIRE(nodesOf(root, "scatter").size() == 1);
  CHECK(nodesOf(root, "gather_send").empty());
  REQUIRE(nodesOf(other, "gather_send").size() == 1);
  REQUIRE(nodesOf(other, "scatter_recv").size() == 1);
  CHECK(nodesOf(other, "cross_entropy").empty());
  const ir::Node* gather = nodesOf(root, "gather").front();
  CHECK(ir::toString(gather->result(0)->type()) == "f32[8, 16, 32]");
  CHECK(ir::toString(gather->result(1)->type()) == "i64[8, 16]");
  CHECK(ir::toString(nodesOf(other, "scatter_recv").front()->result(0)->type()) == "f32[4, 16, 32]");

  auto issued = [](const ir::Graph& g) {
    std::vector<std::pair<std::int64_t, std::string>> out;  // (seq, bucket shapes or op family)
    for (const auto& n : g.nodes()) {
      if (!n->op().issuesCollective) continue;
      std::string what = std::string(n->opName()).substr(0, 6);  // gather / scatte / all_re
      for (const ir::Value* v : n->operands()) what += " " + ir::toString(v->type());
      if (n->opName() == "gather_send" || n->opName() == "scatter_recv") what = std::string(n->opName()).substr(0, 6);
      if (n->opName() == "gather" || n->opName() == "scatter") what = std::string(n->opName()).substr(0, 6);
      out.emplace_back(*ir::getInt(n->attrs(), "seq"), what);
    }
    return out;
  };
  CHECK(issued(root) == issued(other));
}

TEST_CASE("lm-seed over 4 ranks: local placement is balanced and gather puts the full logits and their gradient on rank 0") {
  const ir::Graph forward = testing::compileBundledModel("lm-seed");
  auto peak = [&](int rank, passes::LossPlacement placement) {
    return passes::planMemory(rankStep(forward, dp(4, rank, placement))).peakBytes;
  };
  const std::int64_t local0 = peak(0, passes::LossPlacement::Local);
  const std::int64_t local1 = peak(1, passes::LossPlacement::Local);
  const std::int64_t gather0 = peak(0, passes::LossPlacement::Gather);
  const std::int64_t gather1 = peak(1, passes::LossPlacement::Gather);
  CHECK(local0 == local1);  // the ranks' graphs differ only in dropout offsets
  CHECK(static_cast<double>(std::max(local0, local1)) / static_cast<double>(std::min(local0, local1)) <= 1.02);
  CHECK(static_cast<double>(gather0) / static_cast<double>(gather1) > 1.5);
  // Logits: [32, 250, 40000] f32 = 1.28 GB in all, 0.32 GB per rank. At its peak (the loss
  // gradient) rank 0 holds the full logits and their gradient where a local rank holds its
  // shard's: 2 x (1.28 - 0.32) GB more, up to the gathered targets (i64, 64 KB).
  const std::int64_t logits = std::int64_t{32} * 250 * 40000 * 4;
  const std::int64_t excess = gather0 - local0;
  CHECK(excess >= 2 * (logits - logits / 4));
  CHECK(excess <= 2 * (logits - logits / 4) + std::int64_t{32} * 250 * 8 * 2);
}
