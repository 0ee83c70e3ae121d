// Helpers of the data-parallel pass tests: one rank's scheduled training step, as `gradc
// train` builds it, and the nodes of one op.
#pragma once

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/data_parallel.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/schedule.h"
#include "tests/bundled_model.h"

namespace gradc::testing {

// gpt-mini small enough for unit tests, in several gradient buckets under shardedRank's caps.
inline const DimOverrides kTinyShardedGpt = {{"batch", "12"}, {"seq", "16"}, {"vocab", "37"},
                                             {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}};

// A ZeRO stage by its number; -1: auto (the planner chooses).
inline std::optional<passes::ZeroStage> zeroStage(int number) {
  if (number < 0) return std::nullopt;
  return static_cast<passes::ZeroStage>(number);
}

// One rank's options at a ZeRO stage (and, at stage 3, kept groups and prefetch), with small
// buckets.
inline passes::DataParallelOptions shardedRank(int world, int rank, int shard, int keepGathered = 0,
                                               bool prefetch = true) {
  passes::DataParallelOptions o;
  o.world = world;
  o.rank = rank;
  o.shard = zeroStage(shard);
  o.keepGathered = keepGathered;
  o.prefetch = prefetch;
  o.bucketBytes = 8 << 10;
  o.firstBucketBytes = 4 << 10;
  return o;
}

// The scheduled training step of one rank (AdamW; no budget unless `options` has one).
inline ir::Graph rankStep(const ir::Graph& forward, const passes::DataParallelOptions& o,
                          passes::TrainingPlanOptions options = {}) {
  Expected<ir::Graph> local = passes::partitionForward(forward, o);
  REQUIRE_MESSAGE(local.ok(), local.error().message);
  options.dataParallel = o;
  Expected<passes::TrainingPlan> choice = passes::chooseTrainingPlan(*local, options);
  REQUIRE_MESSAGE(choice.ok(), choice.error().message);
  passes::PassManager pm;
  pm.add<passes::Schedule>();
  Expected<bool> ran = pm.run(choice->graph);
  REQUIRE_MESSAGE(ran.ok(), ran.error().message);
  return std::move(choice->graph);
}

inline std::vector<const ir::Node*> nodesOf(const ir::Graph& g, std::string_view op) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes())
    if (n->opName() == op) out.push_back(n.get());
  return out;
}

}  // namespace gradc::testing
