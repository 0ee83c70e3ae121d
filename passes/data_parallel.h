// Data parallelism: the per-rank (SPMD) graph of a training step over `world` ranks, each
// holding a copy of the parameters and optimizer state and 1/world of every batch.
//
// Two steps, around gradient computation (tools/training_step.cpp runs them):
//
// partitionForward(forward, options) -- before autodiff / micro-batching.
//   1. The forward graph is re-typed for b = B/world examples (passes/micro_batch.h,
//      rebatchForward: inputs get leading extent b, reshape targets and batch-sized constants
//      follow, every type is inferred again). A batch that world does not divide is refused with
//      the nearest batches that split evenly.
//   2. Random nodes draw their rows of the full batch's stream: a dropout whose result has the
//      batch as its leading axis gets rng_offset = rank * (its element count), so rank r's mask
//      is rows [r b, (r+1) b) of the single-device mask and the run follows the single-device
//      trajectory. Any other random node gets its key moved by rank * S (S = 1 + the largest
//      key), so ranks draw independent masks; the graph attribute rng_streams = world * S tells
//      micro-batching how many keys the ranks use together.
//   3. Loss placement.
//      local (the default): every rank computes the loss of its own shard and scales it by
//        b / B = 1 / world. The ranks' losses sum to the full-batch mean (every loss op is a
//        mean over equal shards), so the sum of the ranks' gradients is the full-batch
//        gradient, with no tensor ever moved between ranks but the gradients themselves.
//      gather (torch.nn.DataParallel's placement, kept as the baseline to compare against):
//        every batch-carrying operand of the loss node (the predictions, the targets) is
//        gathered onto rank 0 (`gather`), which computes the full-batch loss; the other ranks
//        send theirs (`gather_send`, whose f32[] result stands in for their loss). Autodiff
//        turns the gather into a `scatter` of the predictions' gradient back to the ranks
//        (`scatter_recv` on the others). Rank 0 holds the full-batch predictions and their
//        gradient -- the imbalance this placement is known for.
//
// insertCollectives(graph, options) -- after gradients (outputs "loss" and "grad.<param>"),
// before the optimizer pass.
//   Gradients are all-reduced (summed) in buckets. Buckets are filled in the order the final
//   gradients are produced (program order of their producers: roughly the reverse of the
//   forward), one dtype per bucket, the first capped at firstBucketBytes (1 MiB by default) so
//   communication starts early, the others at bucketBytes (25 MiB, as PyTorch DDP); a gradient
//   larger than the cap gets a bucket of its own. Each bucket's all_reduce_start is placed
//   right after its last gradient's producer; its all_reduce_wait at the end of the gradient
//   computation, so the optimizer update of a parameter is the first thing that waits for it
//   and communication overlaps the rest of the backward. The loss output is all-reduced the
//   same way (started as soon as it exists, waited with the buckets), so every rank logs the
//   full-batch loss. Collectives are numbered (attribute seq) in a rank-independent order: gather before
//   scatter, then the loss, then the buckets in production order; the scheduler keeps that
//   order, which every rank must follow.
//
// Invariants: world = 1 leaves graphs unchanged (but for a copy); every rank's graph has the
// same collectives with the same seq numbers, bucket contents and shapes; the gather
// placement has exactly one gather and one scatter (or their non-root halves).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::passes {

enum class LossPlacement { Local, Gather };

Expected<LossPlacement> parseLossPlacement(std::string_view name);
std::string_view lossPlacementName(LossPlacement placement);

inline constexpr std::int64_t kDefaultBucketBytes = std::int64_t{25} << 20;
inline constexpr std::int64_t kDefaultFirstBucketBytes = std::int64_t{1} << 20;
// DataParallelOptions::keepGathered when the planner chooses.
inline constexpr int kKeepGatheredAuto = -2;

// The ZeRO stage (passes/shard_state.h, passes/shard_params.h): what each data-parallel rank
// holds only its 1/world shard of. Each stage shards what the one before does, and more, so
// stages compare by what they shard (ZeroStage::Gradients < ZeroStage::Parameters).
enum class ZeroStage : std::uint8_t {
  Replicated = 0,      // nothing sharded
  OptimizerState = 1,  // the optimizer state
  Gradients = 2,       // the optimizer state and the reduced gradients
  Parameters = 3,      // the optimizer state, the gradients and the parameters
};
// The stage's number, as --shard and the plan's JSON write it.
constexpr int zeroStageNumber(ZeroStage stage) { return static_cast<int>(stage); }
// "0", "1", "2", "3"; "auto" is nullopt (the planner chooses with the budget).
Expected<std::optional<ZeroStage>> parseZeroStage(std::string_view text);
// What a stage shards, for summaries: "optimizer state sharded", ...
std::string_view zeroStageSummary(ZeroStage stage);

struct DataParallelOptions {
  int world = 1;
  int rank = 0;
  LossPlacement placement = LossPlacement::Local;
  std::int64_t bucketBytes = kDefaultBucketBytes;
  std::int64_t firstBucketBytes = kDefaultFirstBucketBytes;
  // The ZeRO stage; nullopt: auto, chosen with the budget (passes/plan/training_planner.h,
  // chooseTrainingPlan). The passes that shard read the chosen stage (shardStage()).
  std::optional<ZeroStage> shard = ZeroStage::Replicated;
  // Stage 3: how many parameter groups, counted back from the last one the forward gathers,
  // keep their gathered parameters from the forward to the backward instead of gathering them
  // again (-1: every group; kKeepGatheredAuto: the planner chooses, passes/plan/step_pipeline.h,
  // and passes/shard_params.h reads it as 0); and whether each
  // group's all-gather starts one group ahead of its use (prefetch).
  int keepGathered = kKeepGatheredAuto;
  bool prefetch = true;
  // A world of one partitions and communicates anyway, as DDP does with one process: its
  // collectives are identities, and the communication path runs end to end on one device.
  bool oneRankCollectives = false;

  // Whether the step has collectives: several ranks, or one by request.
  bool communicates() const { return world > 1 || oneRankCollectives; }
  // The stage the sharding passes apply (auto, not yet chosen, shards nothing).
  ZeroStage shardStage() const { return shard.value_or(ZeroStage::Replicated); }
};

Expected<ir::Graph> partitionForward(const ir::Graph& forward, const DataParallelOptions& options);

Status insertCollectives(ir::Graph& graph, const DataParallelOptions& options);

// The gradient buckets of a graph with collectives (all-reduced, or reduce-scattered under ZeRO
// stage 2), in seq order (for logs and summaries); bytes are the gradients'.
struct GradientBucket {
  std::int64_t bucket = 0;
  std::int64_t seq = 0;
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;
};
std::vector<GradientBucket> gradientBuckets(const ir::Graph& graph);

}  // namespace gradc::passes
