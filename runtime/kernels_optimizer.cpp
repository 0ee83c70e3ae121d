// Optimizer kernels (created by the optimizer pass): gradient norm and clipping, the learning
// rate schedule, and the in-place SGD and AdamW updates.
//
// The updates follow torch.optim.SGD / torch.optim.AdamW (and LibTorch's torch::optim
// classes) operation by operation, with the same ATen calls in the same order, so a
// trajectory matches PyTorch's to rounding (bit for bit in the parity tests). Scalars that
// vary per step (learning rate, step, gradient scale) arrive as 0-dim tensors; constants are
// attributes.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/norm.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/generated_kernels.h"
#include "runtime/kernels.h"

namespace gradc::runtime {
namespace {
using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// sqrt of the sum of squares of every operand, as f32[]. Like torch.nn.utils.clip_grad_norm_:
// the 2-norm of the stacked per-tensor 2-norms (each in its operand's dtype, then as f32).
Results globalNormKernel(const KernelArgs& a) {
  std::vector<at::Tensor> norms;
  norms.reserve(a.operands.size());
  for (const at::Tensor& t : a.operands) {
    at::Tensor n = at::norm(t, 2);
    norms.push_back(n.scalar_type() == at::kFloat ? n : n.to(at::kFloat));
  }
  at::Tensor out = resultBuffer(a);
  return {at::norm_out(out, at::stack(norms), 2)};
}

// min(1, max_norm / (norm + 1e-6)), computed like clip_grad_norm_ (reciprocal, multiply,
// clamp) in the norm's dtype.
Results clipCoefKernel(const KernelArgs& a) {
  at::Tensor coef = a.operands[0].add(1e-6).reciprocal().mul(floatAttr(a.node, "max_norm"));
  at::Tensor out = resultBuffer(a);
  return {at::clamp_max_out(out, coef, 1.0)};
}

// Learning rate at a 1-based step: linear warmup to lr, then cosine decay to min_lr over the
// remaining total_steps - warmup_steps steps, min_lr after that. Without warmup, a step <= 0
// reads as the start of the decay (lr) rather than dividing by zero.
Results lrScheduleKernel(const KernelArgs& a) {
  const auto step = a.operands[0].item<std::int64_t>();
  const double lr = floatAttr(a.node, "lr");
  const double minLr = floatAttr(a.node, "min_lr");
  const std::int64_t warmup = intAttr(a.node, "warmup_steps");
  const std::int64_t total = intAttr(a.node, "total_steps");
  double value;
  if (warmup > 0 && step <= warmup) {
    value = lr * static_cast<double>(step) / static_cast<double>(warmup);
  } else {
    double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<std::int64_t>(1, total - warmup));
    progress = std::clamp(progress, 0.0, 1.0);
    value = minLr + 0.5 * (lr - minLr) * (1.0 + std::cos(std::numbers::pi * progress));
  }
  return {resultBuffer(a).fill_(value)};
}

// The gradient the update sees: grad * grad_scale (the clipping coefficient, or 1), scaled in
// place as torch.nn.utils.clip_grad_norm_ does (the update is the gradient's last use), so no
// temporary. A scale of exactly 1 skips the multiply. The 0-dim f32 scale multiplies as the
// Scalar it holds would (same value, same f32 product) without a wrapper.
const at::Tensor& scaledGrad(const at::Tensor& grad, const at::Tensor& gradScale) {
  if (gradScale.item<double>() != 1.0) grad.mul_(gradScale);
  return grad;
}

// (param, grad, lr, grad_scale[, momentum_buf]) {momentum, weight_decay}; torch.optim.SGD
// with dampening 0 and nesterov off:
//   g = grad * grad_scale + weight_decay * param
//   buf = momentum * buf + g        (buf starts at zeros: equal to PyTorch's first-step clone)
//   param -= lr * buf               (lr * g without momentum)
Results sgdStepKernel(const KernelArgs& a) {
  const at::Tensor& param = a.operands[0];
  const auto lr = a.operands[2].item<double>();
  const double momentum = floatAttr(a.node, "momentum");
  const double weightDecay = floatAttr(a.node, "weight_decay");
  at::Tensor g = scaledGrad(a.operands[1], a.operands[3]);
  if (weightDecay != 0.0) g = g.add(param, weightDecay);
  if (momentum != 0.0) {
    const at::Tensor& buf = a.operands[4];
    buf.mul_(momentum).add_(g);
    param.add_(buf, -lr);
  } else {
    param.add_(g, -lr);
  }
  return {};
}

// (param, grad, m, v, lr, step, grad_scale) {beta1, beta2, eps, weight_decay}; torch.optim.AdamW
// with amsgrad off, step 1-based:
//   param *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//   param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// The same update in one pass over the four tensors (the adamw_step attribute `fused`, set with
// elementwise fusion): each element's parameter, moments and gradient are read once and written
// once, with the op-by-op path's operations in its order and its precision (T), instead of nine
// passes and a temporary. The gradient scale multiplies in registers (the gradient is not
// written). Differs from the op-by-op path only where ATen's kernels contract a multiply-add.
template <class T>
void adamwOnePass(T* p, const T* g, T* m, T* v, std::int64_t n, T gradScale, T decay, T beta1, T oneMinusBeta1,
                  T beta2, T oneMinusBeta2, T rootBias2, T eps, T stepSize, bool scaleGrad, bool decayParam) {
  at::parallel_for(0, n, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const T gi = scaleGrad ? g[i] * gradScale : g[i];
      T pi = decayParam ? p[i] * decay : p[i];
      const T mi = m[i] * beta1 + gi * oneMinusBeta1;
      const T vi = v[i] * beta2 + gi * gi * oneMinusBeta2;
      const T denom = std::sqrt(vi) / rootBias2 + eps;
      pi = pi + stepSize * (mi / denom);
      p[i] = pi;
      m[i] = mi;
      v[i] = vi;
    }
  });
}

Results adamwOnePassKernel(const KernelArgs& a, double lr, std::int64_t step) {
  const at::Tensor& param = a.operands[0];
  const double beta1 = floatAttr(a.node, "beta1"), beta2 = floatAttr(a.node, "beta2");
  const double eps = floatAttr(a.node, "eps"), weightDecay = floatAttr(a.node, "weight_decay");
  const double gradScale = a.operands[6].item<double>();
  const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  for (size_t k : {0, 1, 2, 3}) TORCH_CHECK(a.operands[k].is_contiguous(), "adamw_step: operand ", k, " is strided");
  // The generated kernel (codegen/optimizer_kernels.h) when the artifact carries one: the same
  // arithmetic, vectorised for this CPU.
  if (a.generated) {
    const auto fn = reinterpret_cast<AdamwKernelFn>(a.generated->fn);
    void* buffers[4] = {param.data_ptr(), a.operands[1].data_ptr(), a.operands[2].data_ptr(), a.operands[3].data_ptr()};
    const double scalars[9] = {gradScale, 1.0 - lr * weightDecay, beta1, 1.0 - beta1, beta2, 1.0 - beta2,
                               std::sqrt(bias2), eps, -lr / bias1};
    at::parallel_for(0, param.numel(), 1 << 14,
                     [&](std::int64_t begin, std::int64_t end) { fn(buffers, begin, end, scalars); });
    return {};
  }
  auto run = [&](auto zero) {
    using T = decltype(zero);
    adamwOnePass<T>(param.data_ptr<T>(), a.operands[1].data_ptr<T>(), a.operands[2].data_ptr<T>(),
                    a.operands[3].data_ptr<T>(), param.numel(), static_cast<T>(gradScale),
                    static_cast<T>(1.0 - lr * weightDecay), static_cast<T>(beta1), static_cast<T>(1.0 - beta1),
                    static_cast<T>(beta2), static_cast<T>(1.0 - beta2), static_cast<T>(std::sqrt(bias2)),
                    static_cast<T>(eps), static_cast<T>(-lr / bias1), gradScale != 1.0, weightDecay != 0.0);
  };
  if (param.scalar_type() == at::kDouble) run(0.0);
  else if (param.scalar_type() == at::kFloat) run(0.0f);
  else TORCH_CHECK(false, "adamw_step {fused = true} updates f32 or f64 parameters, got ", param.scalar_type());
  return {};
}

Results adamwStepKernel(const KernelArgs& a) {
  if (ir::getBool(a.node.attrs(), "fused").value_or(false))
    return adamwOnePassKernel(a, a.operands[4].item<double>(), a.operands[5].item<std::int64_t>());
  const at::Tensor& param = a.operands[0];
  const at::Tensor& m = a.operands[2];
  const at::Tensor& v = a.operands[3];
  const auto lr = a.operands[4].item<double>();
  const auto step = a.operands[5].item<std::int64_t>();
  const double beta1 = floatAttr(a.node, "beta1");
  const double beta2 = floatAttr(a.node, "beta2");
  const double eps = floatAttr(a.node, "eps");
  const double weightDecay = floatAttr(a.node, "weight_decay");
  at::Tensor g = scaledGrad(a.operands[1], a.operands[6]);

  if (weightDecay != 0.0) param.mul_(1.0 - lr * weightDecay);
  const double biasCorrection1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double biasCorrection2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  m.mul_(beta1).add_(g, 1.0 - beta1);
  v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
  at::Tensor denom = v.sqrt().div_(std::sqrt(biasCorrection2)).add_(eps);
  param.addcdiv_(m, denom, -lr / biasCorrection1);
  return {};
}

const KernelEntry kOptimizer[] = {
    {"global_norm", globalNormKernel},
    {"clip_coef", clipCoefKernel},
    {"lr_schedule", lrScheduleKernel},
    {"sgd_step", sgdStepKernel},
    {"adamw_step", adamwStepKernel},
};

}  // namespace

std::span<const KernelEntry> optimizerKernels() { return kOptimizer; }

}  // namespace gradc::runtime
