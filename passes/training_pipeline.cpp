#include "passes/training_pipeline.h"

#include <utility>

#include "passes/dce.h"
#include "passes/fuse.h"
#include "passes/fuse_loss.h"
#include "passes/liveness.h"
#include "passes/optimizer.h"
#include "passes/remat_strategies.h"
#include "passes/schedule.h"
#include "passes/shard_state.h"

namespace gradc::passes {

Expected<bool> PartitionPass::run(ir::Graph& graph) {
  Expected<ir::Graph> shard = partitionForward(graph, options_);
  if (!shard) return shard.error();
  graph = std::move(*shard);
  return true;
}

Expected<bool> MicroBatchPass::run(ir::Graph& graph) {
  Expected<ir::Graph> joint = microBatchedGradients(graph, k_);
  if (!joint) return joint.error();
  graph = std::move(*joint);
  return true;
}

Expected<bool> CollectivesPass::run(ir::Graph& graph) {
  if (Status s = insertCollectives(graph, options_); !s) return Error{s.message()};
  return true;
}

Expected<bool> MemoryPlanPass::run(ir::Graph& graph) {
  *out_ = planMemory(graph);
  return false;
}

Expected<TrainingStepResult> buildTrainingStepPipeline(const ir::Graph& forward, const TrainingPlanOptions& options,
                                                       const PassManagerOptions& pmOptions) {
  const bool parallel = options.dataParallel && options.dataParallel->communicates();
  // 1. The search, on the rank's shard.
  std::optional<ir::Graph> shard;
  if (parallel) {
    Expected<ir::Graph> p = partitionForward(forward, *options.dataParallel);
    if (!p) return p.error();
    shard = std::move(*p);
  }
  Expected<RematChoice> choice = chooseTrainingPlan(shard ? *shard : forward, options);
  if (!choice) return choice.error();
  shard.reset();

  // 2. The chosen configuration as one pipeline.
  TrainingStepResult result{remat::cloneGraph(forward), {}, {}, choice->microBatches, choice->lossChunks,
                            choice->shardStage};
  RematOptions remat = options.remat;
  remat.proposal = choice->report.proposal;
  PassManager pm(pmOptions);
  if (parallel) pm.add<PartitionPass>(*options.dataParallel);
  if (choice->lossChunks > 0) pm.add<FuseLossPass>(choice->lossChunks);
  pm.add<MicroBatchPass>(choice->microBatches);
  if (options.dataParallel) pm.add<CollectivesPass>(*options.dataParallel);
  if (options.optimizer) pm.add<OptimizerPass>(*options.optimizer);
  if (options.optimizer && choice->shardStage > 0) {
    DataParallelOptions sharded = *options.dataParallel;
    sharded.shard = choice->shardStage;
    pm.add<ShardStatePass>(sharded);
  }
  pm.add<DeadCodeElimination>();
  if (options.fuseElementwise) pm.add<FuseElementwise>();
  auto rematPass = std::make_unique<RematPass>(remat);
  RematPass* rematRun = rematPass.get();
  pm.add(std::move(rematPass));
  pm.add<Schedule>();
  pm.add<MemoryPlanPass>(&result.plan);
  if (Expected<bool> ran = pm.run(result.graph); !ran) return ran.error();

  const RematReport& searched = choice->report;
  const RematReport& ran = rematRun->report();
  if (ran.recomputeFlops != searched.recomputeFlops || ran.predictedPeakBytes != searched.predictedPeakBytes)
    return Error{"internal: the training pipeline's remat (" + std::to_string(ran.predictedPeakBytes) + " bytes, " +
                 std::to_string(ran.recomputeFlops) + " recompute FLOPs) disagrees with the search's choice (" +
                 std::to_string(searched.predictedPeakBytes) + " bytes, " + std::to_string(searched.recomputeFlops) +
                 " FLOPs)"};
  if (lossChunksOf(result.graph) != choice->lossChunks)
    return Error{"internal: the training pipeline's fused loss has " + std::to_string(lossChunksOf(result.graph)) +
                 " chunks, the search chose " + std::to_string(choice->lossChunks)};
  // The search judged every proposal on its scheduled peak: the plan emitted must be that peak.
  if (result.plan.peakBytes != searched.predictedPeakBytes)
    return Error{"internal: the memory plan's peak (" + std::to_string(result.plan.peakBytes) +
                 " bytes) differs from the scheduled peak the search chose on (" +
                 std::to_string(searched.predictedPeakBytes) + " bytes)"};
  result.remat = searched;
  result.plan.strategy = std::string(rematStrategyName(searched.chosen));
  result.plan.budgetBytes = options.remat.budgetBytes;
  result.plan.reserveBytes = options.remat.reserveBytes;
  return result;
}

}  // namespace gradc::passes
