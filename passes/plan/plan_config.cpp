#include "passes/plan/plan_config.h"

namespace gradc::passes {

namespace {

std::string keptGroupsText(int kept) {
  if (kept < 0) return "every bucket's parameters kept from the forward";
  if (kept == 0) return "every bucket's parameters gathered again for the backward";
  if (kept == 1) return "the last bucket the forward gathers kept from the forward, the others gathered again";
  return "the last " + std::to_string(kept) + " buckets the forward gathers kept from the forward, the others gathered again";
}

}  // namespace

std::string describePlanConfig(const PlanConfig& config) {
  std::string d;
  if (config.microBatches > 1) d += "; " + std::to_string(config.microBatches) + " micro-batches";
  switch (config.zero) {
    case ZeroStage::Replicated: break;
    case ZeroStage::OptimizerState: d += "; optimizer state sharded (--shard 1)"; break;
    case ZeroStage::Gradients: d += "; optimizer state and gradients sharded (--shard 2)"; break;
    case ZeroStage::Parameters:
      d += "; optimizer state, gradients and parameters sharded (--shard 3, " + keptGroupsText(config.keptGroups) + ")";
      break;
  }
  if (config.fusedLoss())
    d += "; fused loss in " + std::to_string(config.lossChunks) + " chunk" + (config.lossChunks == 1 ? "" : "s");
  return d;
}

}  // namespace gradc::passes
