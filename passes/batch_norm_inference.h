// Inference mode for batch normalisation: every batch_norm whose running statistics are kept
// (its mean and variance feed a running_stats_update) becomes batch_norm_inference over those
// running statistics, and the update is removed, as torch.nn.Module.eval() makes BatchNorm2d
// normalise. A batch_norm without running statistics (track_running_stats: false) keeps using
// its batch statistics, as in PyTorch. Used by `gradc eval`, with StripDropout.
//
// Algorithm: one pass over the nodes; for each running_stats_update, its batch_norm (the
// producer of its batch mean) is replaced by batch_norm_inference(x, weight, bias,
// running_mean, running_var) at the batch_norm's place, then the update and the batch_norm
// are erased. Invariant: no running_stats_update remains; every other node keeps its order.
#pragma once

#include "passes/pass.h"

namespace gradc::passes {

class BatchNormInference final : public Pass {
 public:
  std::string_view name() const override { return "batch-norm-inference"; }
  Expected<bool> run(ir::Graph& graph) override;
};

}  // namespace gradc::passes
