#include "passes/plan/step_pipeline.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "passes/dce.h"
#include "passes/fuse.h"
#include "passes/fuse_attention.h"
#include "passes/micro_batch.h"
#include "passes/shard_state.h"

namespace gradc::passes {

Expected<ConfigSpace> configSpace(const ir::Graph& forward, const TrainingPlanOptions& options, bool recordStages) {
  if (options.microBatches < 0)
    return Error{"the number of micro-batches must be positive (or 0 for auto), got " + std::to_string(options.microBatches)};
  ConfigSpace v;
  const bool gathered = options.dataParallel && options.dataParallel->communicates() &&
                        options.dataParallel->placement == LossPlacement::Gather;
  if (gathered && options.microBatches > 1)
    return Error{"--loss-placement gather (the DataParallel baseline) runs whole batches; it does not combine with "
                 "micro-batching"};
  if (options.microBatches > 0 || gathered)
    v.microBatches = {std::max(options.microBatches, 1)};
  else if (options.plan.budgetBytes)
    v.microBatches = microBatchCandidates(forward);
  else
    v.microBatches = {1};

  // Fusing the loss (passes/fuse_loss.h): forced, or under auto one more family of graphs to
  // choose from, when there is a budget to fit.
  const LossChunking& chunking = options.lossChunks;
  const bool fusable = countFusableLosses(forward) > 0;
  if (chunking.mode == LossChunking::Mode::Fixed && !fusable)
    return Error{"--loss-chunks " + std::to_string(chunking.chunks) + ": the loss cannot be fused: " +
                 whyNoFusableLoss(forward) +
                 (gathered ? " (the gather placement computes the loss on gathered logits; use --loss-placement local)"
                           : "")};
  v.unfused = chunking.mode != LossChunking::Mode::Fixed;
  v.fused = fusable && (chunking.mode == LossChunking::Mode::Fixed ||
                        (chunking.mode == LossChunking::Mode::Auto && options.plan.budgetBytes));
  if (v.fused) {
    const int first = chunking.mode == LossChunking::Mode::Fixed ? chunking.chunks : 1;
    Expected<ir::Graph> fused = fusedLossForward(forward, first, recordStages ? &v.fusedForwardStages : nullptr);
    if (!fused) return fused.error();
    v.fusedForward = std::move(*fused);
  }

  // ZeRO stages (passes/shard_state.h): the one asked for, or under auto with a budget every
  // stage (without a budget auto means replicated).
  if (options.dataParallel && options.dataParallel->world > 1) {
    const std::optional<ZeroStage> asked = options.dataParallel->shard;
    // Under the gather placement rank 0's step differs from the others', so the ranks plan
    // their recompute apart; under stage 3 a recompute plan places all-gathers, which every
    // rank must issue alike.
    if (asked == ZeroStage::Parameters && gathered)
      return Error{"--loss-placement gather (the DataParallel baseline) gives rank 0 another step than the others, "
                   "so their recompute plans, and under --shard 3 the parameter gathers those place, can differ; "
                   "use --loss-placement local (the default) or --shard 2 or less"};
    if (asked) v.zeroStages = {*asked};
    else if (options.plan.budgetBytes) {
      v.zeroStages = {ZeroStage::Replicated, ZeroStage::OptimizerState, ZeroStage::Gradients};
      if (!gathered) v.zeroStages.push_back(ZeroStage::Parameters);
    }
    // Keep or gather again: asked, or with a budget the planner's choice (the least
    // communication that fits: all kept, then fewer, then none), without one FSDP's default
    // (gather again).
    const int keep = options.dataParallel->keepGathered;
    if (keep != kKeepGatheredAuto) v.keepGathered = {keep};
    else if (options.plan.budgetBytes) {
      v.keepGathered = {-1, 0};
      v.keepGatheredBetween = true;
    }
    else v.keepGathered = {0};
  }
  return v;
}

Expected<ir::Graph> fusedLossForward(const ir::Graph& forward, int chunks, std::vector<RecordedStage>* record) {
  ir::Graph fused = remat::cloneGraph(forward);
  if (Expected<int> n = fuseLinearCrossEntropy(fused, chunks); !n) return n.error();
  PassManager shown(PassManagerOptions{.verifyAfterChange = false, .record = record});
  if (Status s = shown.show(fused, "fuse-loss"); !s) return s.error();
  return fused;
}

Expected<ir::Graph> buildConfiguredStep(const ir::Graph& from, ir::Graph* consumable, const PlanConfig& config,
                                        const TrainingPlanOptions& options, std::vector<RecordedStage>* record) {
  PassManager pm(PassManagerOptions{.verifyAfterChange = false, .record = record});
  // Attention cores become fused attention nodes before autodiff, so the backward is theirs.
  std::optional<ir::Graph> attentionFused;
  if (options.fuseElementwise && countFusableAttention(from) > 0) {
    attentionFused = remat::cloneGraph(from);
    if (Expected<int> n = fuseAttention(*attentionFused); !n) return n.error();
    if (Status s = pm.show(*attentionFused, "fuse-attention"); !s) return s.error();
  }
  Expected<ir::Graph> g = attentionFused ? microBatchedGradients(std::move(*attentionFused), config.microBatches)
                          : &from == consumable ? microBatchedGradients(std::move(*consumable), config.microBatches)
                                                : microBatchedGradients(from, config.microBatches);
  if (!g) {
    if (options.dataParallel && options.dataParallel->world > 1)  // `from` is one rank's shard
      return g.error().withContext("on each of the " + std::to_string(options.dataParallel->world) +
                                   " data-parallel ranks (which hold 1/" + std::to_string(options.dataParallel->world) +
                                   " of the batch): ");
    return g.error();
  }
  if (Status s = pm.show(*g, "micro-batch"); !s) return s.error();
  if (options.dataParallel) {
    if (Status s = insertCollectives(*g, *options.dataParallel); !s) return s.error();
    if (Status s = pm.show(*g, "collectives"); !s) return s.error();
  }
  if (options.optimizer) pm.add<OptimizerPass>(*options.optimizer);
  if (options.optimizer && config.zero != ZeroStage::Replicated) {
    DataParallelOptions sharded = *options.dataParallel;
    sharded.shard = config.zero;
    sharded.keepGathered = config.keptGroups;
    pm.add<ShardStatePass>(sharded);
  }
  pm.add<DeadCodeElimination>();
  if (options.fuseElementwise) pm.add<FuseElementwise>();
  if (Expected<bool> r = pm.run(*g); !r) return r.error();
  return std::move(*g);
}

}  // namespace gradc::passes
