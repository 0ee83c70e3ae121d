// The plan's configuration: how one training step is built before recompute -- micro-batch
// count, ZeRO stage, stage 3's kept parameter groups, the fused loss's chunks. One value, made
// where the search builds a candidate step (passes/plan/training_planner.h) and carried as it
// is to the objective's order (PlanCost), the report (TrainingPlanReport::config), the decision
// other ranks apply (PlanDecision), the artifact's manifest and the summaries. A new plan
// dimension (precision, tensor-parallel degree, offload) is a field here, read where it matters.
#pragma once

#include <string>

#include "passes/data_parallel.h"

namespace gradc::passes {

struct PlanConfig {
  int microBatches = 1;
  ZeroStage zero = ZeroStage::Replicated;
  // The fused loss's chunks (passes/fuse_loss.h); 0: the loss is not fused. While the search
  // builds a fused step, its chunk count is chosen afterwards (setLossChunks): any count > 0
  // then says only "fused".
  int lossChunks = 0;
  // Stage 3: the parameter groups that keep their gathered parameters from the forward to the
  // backward, counted back from the last one the forward gathers (-1: every group, none gathered
  // again; DataParallelOptions::keepGathered). 0 below stage 3.
  int keptGroups = 0;

  bool fusedLoss() const { return lossChunks > 0; }
  bool operator==(const PlanConfig&) const = default;
};

// What a configuration adds to a recompute proposal's description, e.g. "; 2 micro-batches;
// optimizer state sharded (--shard 1); fused loss in 4 chunks" (empty for the plain step).
std::string describePlanConfig(const PlanConfig& config);

}  // namespace gradc::passes
