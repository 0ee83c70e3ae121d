// Optimizer: appends one in-place parameter update per parameter to a joint forward +
// backward graph (the output of autodiff), with its learning-rate schedule and optional
// gradient-norm clipping.
//
// Algorithm (all nodes phase opt, spec name "optimizer", appended at the end):
//   1. Snapshot graph.params(); each needs an output grad.<p> of its type (from autodiff).
//   2. Graph input `step` : i64[], the 1-based step number the runtime feeds;
//      lr = lr_schedule(step){lr, min_lr, warmup_steps, total_steps}, exposed as output "lr".
//   3. Gradient scale: with clipNorm > 0, norm = global_norm(every grad, parameter order),
//      scale = clip_coef(norm){max_norm}, and norm is exposed as output "grad_norm";
//      otherwise scale = full 1.0.
//   4. For every parameter p, in order: its optimizer state as new zero-initialised
//      parameters (attrs init = "zeros", role = "opt_state", of = p), then the update
//        SGD:   [opt.momentum.<p> when momentum != 0]
//               sgd_step(p, grad, lr, scale[, momentum]){momentum, weight_decay}
//        AdamW: opt.adam_m.<p>, opt.adam_v.<p>
//               adamw_step(p, grad, m, v, lr, step, scale){beta1, beta2, eps, weight_decay}
//      Decay groups: with DecayGroups::Matrices, weight_decay is 0 on parameters of rank < 2
//      (biases, norm weights), as nanoGPT's configure_optimizers and Hugging Face's Trainer
//      group them; the update attributes carry each parameter's group.
//   5. The grad.<p> outputs are removed: the gradients stay alive as operands of the update
//      ops, which have side effects, so dead-code elimination keeps the whole backward graph.
//
// Complexity: O(nodes + uses + parameters x outputs) (step 5 removes one output at a time).
//
// Invariants: each parameter (and each state tensor) is updated exactly once per step, by the
// last nodes of the graph, so after its last forward and backward use; updates read the
// gradients and never write them; every gradient is scaled by the same factor, computed from
// all gradients before any update runs.
//
// Errors: a parameter without its grad.<p> output (run autodiff first); a graph that already
// has optimizer nodes or a `step` input; out-of-range options.
#pragma once

#include <cstdint>

#include "passes/pass.h"

namespace gradc::passes {

// Defaults are PyTorch's (torch.optim.SGD / AdamW) except SGD momentum (0.9 here, 0 there) and
// where noted.
struct OptimizerOptions {
  enum class Kind { Sgd, AdamW };
  Kind kind = Kind::AdamW;
  double lr = 1e-3;  // peak learning rate (after warmup)
  // Floor of the cosine decay. Negative (the default): 0.1 * lr, the usual choice for
  // language-model schedules; set it to lr for a constant learning rate after warmup.
  double minLr = -1.0;
  double momentum = 0.9;  // SGD only; 0 = plain SGD, without a momentum buffer
  // Negative (the default): 0 for SGD (coupled L2, as torch.optim.SGD), 0.01 for AdamW
  // (decoupled, as torch.optim.AdamW).
  double weightDecay = -1.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW only
  // Which parameters weight decay applies to. All (the default): every one, as
  // torch.optim.AdamW(model.parameters()) does. Matrices: those of rank >= 2 only (linear, conv
  // and embedding weights), never biases or norm weights.
  enum class DecayGroups { All, Matrices };
  DecayGroups decay = DecayGroups::All;
  double clipNorm = 0.0;  // max global gradient norm; 0 = no clipping
  std::int64_t warmupSteps = 0;
  std::int64_t totalSteps = 1;  // warmup + cosine decay

  // The values the pass uses, defaults resolved.
  double resolvedMinLr() const { return minLr < 0 ? 0.1 * lr : minLr; }
  double resolvedWeightDecay() const { return weightDecay >= 0 ? weightDecay : kind == Kind::AdamW ? 0.01 : 0.0; }
};

class OptimizerPass final : public Pass {
 public:
  explicit OptimizerPass(OptimizerOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "optimizer"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  OptimizerOptions options_;
};

}  // namespace gradc::passes
