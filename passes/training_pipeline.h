// The training step as one pipeline of registered passes, run by a PassManager:
//
//   forward graph
//   -> partition       the rank's shard (data parallelism; passes/data_parallel.h)
//   -> fuse-loss       the LM head and cross_entropy as one chunked op (passes/fuse_loss.h)
//   -> micro-batch     k micro-batches with gradient accumulation; k = 1 is autodiff
//   -> collectives     bucketed gradient all-reduce (data parallelism)
//   -> optimizer       the parameter updates
//   -> shard-state     ZeRO: optimizer state (and gradients) sharded over the ranks (passes/shard_state.h)
//   -> dce
//   -> fuse            elementwise regions as fused nodes (passes/fuse.h; when asked)
//   -> remat           recompute under the byte budget (passes/remat.h)
//   -> schedule        the final order
//   -> memory-plan     liveness and offsets (passes/memory_plan.h; changes nothing)
//
// The micro-batch count, the loss chunks and the recompute strategy are chosen first by a search over every
// candidate (chooseTrainingPlan: several counts, every strategy), which needs the graphs of
// several counts side by side; the chosen configuration then runs as this pipeline, so the
// verifier checks the graph after every stage and blames the pass that broke it, and
// --print-after-all / --dump-dir show every stage. The pipeline's remat, given the chosen
// strategy and the budget, makes the choice the search made: the same proposals in the same
// order (runTrainingPipeline checks the predicted peak and the recompute FLOPs agree).
#pragma once

#include <optional>

#include "ir/graph.h"
#include "passes/data_parallel.h"
#include "passes/memory_plan.h"
#include "passes/micro_batch.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/remat.h"

namespace gradc::passes {

// Replaces a forward graph by one data-parallel rank's shard (partitionForward).
class PartitionPass final : public Pass {
 public:
  explicit PartitionPass(DataParallelOptions options) : options_(options) {}
  std::string_view name() const override { return "partition"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  DataParallelOptions options_;
};

// Replaces a forward graph by the joint graph of k micro-batches (microBatchedGradients).
class MicroBatchPass final : public Pass {
 public:
  explicit MicroBatchPass(int microBatches) : k_(microBatches) {}
  std::string_view name() const override { return "micro-batch"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  int k_;
};

// Inserts the gradient collectives of a data-parallel rank (insertCollectives).
class CollectivesPass final : public Pass {
 public:
  explicit CollectivesPass(DataParallelOptions options) : options_(options) {}
  std::string_view name() const override { return "collectives"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  DataParallelOptions options_;
};

// Plans the scheduled graph's memory into `out`; never changes the graph.
class MemoryPlanPass final : public Pass {
 public:
  explicit MemoryPlanPass(MemoryPlan* out) : out_(out) {}
  std::string_view name() const override { return "memory-plan"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  MemoryPlan* out_;
};

struct TrainingStepResult {
  ir::Graph graph;  // scheduled
  RematReport remat;
  MemoryPlan plan;
  int microBatches = 1;
  int lossChunks = 0;  // 0: the loss is not fused
  int shardStage = 0;  // ZeRO stage (passes/shard_state.h)
};

// Searches the micro-batch count and recompute plan (chooseTrainingPlan), then runs the chosen
// configuration as the pipeline above from the (unpartitioned) forward graph, under a
// PassManager with `pm` (verification, printing, dumps). options.dataParallel, when set with
// world > 1, partitions first. The plan's strategy and budget are filled in.
Expected<TrainingStepResult> buildTrainingStepPipeline(const ir::Graph& forward, const TrainingPlanOptions& options,
                                                       const PassManagerOptions& pm = {});

}  // namespace gradc::passes
