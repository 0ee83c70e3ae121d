// The training step before remat, as one pipeline definition shared by every configuration the
// planner tries and by the step it finally emits:
//
//   forward (the rank's shard under data parallelism; fused-loss forward when fused)
//   -> fuse-attention  attention cores as attention nodes (with elementwise fusion; passes/fuse_attention.h)
//   -> micro-batch     k micro-batches with gradient accumulation; k = 1 is autodiff
//   -> collectives     bucketed gradient all-reduce (data parallelism)
//   -> optimizer       the parameter updates
//   -> shard-state     ZeRO: optimizer state (and gradients) sharded over the ranks
//   -> dce
//   -> fuse            elementwise regions as fused nodes (when asked)
//
// and the space of configurations a request allows (configSpace): micro-batch counts, ZeRO
// stages, unfused and fused loss. The planner (passes/plan/training_planner.h) builds each
// configuration it considers with buildConfiguredStep, unverified, and verifies once the graph
// it keeps. With a record, every stage's IR is kept, so the emitted step's --print-after-all
// and --dump-dir show the stages that made it without building it again.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "passes/data_parallel.h"
#include "passes/fuse_loss.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/plan/plan_config.h"
#include "passes/remat.h"

namespace gradc::passes {

// What a caller asks of the training step (the request the planner searches under).
struct TrainingPlanOptions {
  std::optional<OptimizerOptions> optimizer = OptimizerOptions{};  // nullopt: gradients as outputs
  // Set for a data-parallel rank: `forward` is already partitioned (partitionForward), and the
  // gradient collectives are inserted before the optimizer (insertCollectives), so the budget
  // and the remat plan see the rank's shapes, buckets and communication buffers.
  std::optional<DataParallelOptions> dataParallel;
  RematStrategy remat = RematStrategy::Auto;  // which recompute proposals are considered
  PlanOptions plan;  // the budget, the reserve and the objective
  int microBatches = 1;  // 0: auto (with a budget: microBatchCandidates; without: 1)
  LossChunking lossChunks;  // auto: fused only when that is the cheapest way to fit the budget
  // Elementwise regions become fused nodes (passes/fuse.h) after the optimizer, before remat, so
  // the search plans the fused step; attention cores become attention nodes before autodiff
  // (passes/fuse_attention.h). gradc compile and train set it unless --no-fuse.
  bool fuseElementwise = false;
};

// The configurations a request allows, in the order the search builds them.
struct ConfigSpace {
  std::vector<int> microBatches;
  std::vector<ZeroStage> zeroStages{ZeroStage::Replicated};
  // Stage 3's choices of kept groups, in the order tried: every group kept (no second
  // all-gather) before every group gathered again (the least memory).
  std::vector<int> keepGathered{0};
  // Whether the search also tries keeping the last G/2, G/4, ..., 1 of the G groups the forward
  // gathers, between all and none (G is known once a stage 3 step is built).
  bool keepGatheredBetween = false;
  bool unfused = true;
  bool fused = false;
  std::optional<ir::Graph> fusedForward;       // the forward with its loss fused (when fused)
  std::vector<RecordedStage> fusedForwardStages;  // its fuse-loss stage, when recorded
};
Expected<ConfigSpace> configSpace(const ir::Graph& forward, const TrainingPlanOptions& options,
                                  bool recordStages = false);

// `forward` with its loss fused into `chunks` chunks (the fuse-loss stage); with `record`, that
// stage is appended there.
Expected<ir::Graph> fusedLossForward(const ir::Graph& forward, int chunks, std::vector<RecordedStage>* record = nullptr);

// The pipeline above for one configuration, from `from` (the forward, or the space's fused
// forward); taking `consumable` over when it is `from` (one micro-batch then reuses its nodes).
// Not verified. With `record`, its stages after the input are appended there.
// Of `config`, the count of micro-batches, the ZeRO stage and the kept groups are read; whether
// the loss is fused is `from`'s (its chunk count is set after).
Expected<ir::Graph> buildConfiguredStep(const ir::Graph& from, ir::Graph* consumable, const PlanConfig& config,
                                        const TrainingPlanOptions& options,
                                        std::vector<RecordedStage>* record = nullptr);

}  // namespace gradc::passes
