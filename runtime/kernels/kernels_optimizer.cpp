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
#include <ATen/ops/sqrt.h>
#include <ATen/ops/stack.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ir/shard_layout.h"
#include "runtime/kernels/generated_kernels.h"
#include "runtime/kernels/kernels.h"

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
  at::norm_out(out, at::stack(norms), 2);
  if (ir::getBool(a.node.attrs(), "squared").value_or(false)) out.mul_(out);  // {squared}: no root
  return {out};
}

// sqrt of the all-reduced sum of the ranks' squared norms (ZeRO stage 2's global norm).
Results normFromSquaresKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::sqrt_out(out, a.operands[0])};
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
  const auto step = static_cast<std::int64_t>(scalarOperand(a, 0));
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
// Scalar it holds would (same value, same f32 product) without a wrapper. The scale's value on
// the host is read once per step (kernel_detail::scalarOperand).
struct GradScale {
  const at::Tensor& tensor;
  double value;
};

const at::Tensor& scaledGrad(const at::Tensor& grad, const GradScale& scale) {
  if (scale.value != 1.0) grad.mul_(scale.tensor);
  return grad;
}

// (param, grad, lr, grad_scale[, momentum_buf]) {momentum, weight_decay}; torch.optim.SGD
// with dampening 0 and nesterov off:
//   g = grad * grad_scale + weight_decay * param
//   buf = momentum * buf + g        (buf starts at zeros: equal to PyTorch's first-step clone)
//   param -= lr * buf               (lr * g without momentum)
struct SgdHyper {
  double momentum, weightDecay;
  explicit SgdHyper(const ir::Node& n) : momentum(floatAttr(n, "momentum")), weightDecay(floatAttr(n, "weight_decay")) {}
};

// The update of one parameter (or one stretch of one); `buf` is undefined without momentum.
void sgdUpdate(const at::Tensor& param, const at::Tensor& grad, double lr, const GradScale& gradScale,
               const at::Tensor& buf, const SgdHyper& h) {
  at::Tensor g = scaledGrad(grad, gradScale);
  if (h.weightDecay != 0.0) g = g.add(param, h.weightDecay);
  if (h.momentum != 0.0) {
    buf.mul_(h.momentum).add_(g);
    param.add_(buf, -lr);
  } else {
    param.add_(g, -lr);
  }
}

Results sgdStepKernel(const KernelArgs& a) {
  sgdUpdate(a.operands[0], a.operands[1], scalarOperand(a, 2), GradScale{a.operands[3], scalarOperand(a, 3)},
            a.operands.size() == 5 ? a.operands[4] : at::Tensor(), SgdHyper(a.node));
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

struct AdamwHyper {
  double beta1, beta2, eps, weightDecay;
  bool fused;
  explicit AdamwHyper(const ir::Node& n)
      : beta1(floatAttr(n, "beta1")), beta2(floatAttr(n, "beta2")), eps(floatAttr(n, "eps")),
        weightDecay(floatAttr(n, "weight_decay")), fused(ir::getBool(n.attrs(), "fused").value_or(false)) {}
};

// The generated kernels' scalars (kernel_detail::adamwOnePassScalars).
std::array<double, 9> onePassScalars(double lr, std::int64_t step, double gradScale, const AdamwHyper& h) {
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  return {gradScale, 1.0 - lr * h.weightDecay, h.beta1, 1.0 - h.beta1, h.beta2, 1.0 - h.beta2,
          std::sqrt(bias2), h.eps, -lr / bias1};
}

// The one-pass update of contiguous tensors: the generated kernel when there is one.
void adamwOnePassUpdate(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& m, const at::Tensor& v,
                        double lr, std::int64_t step, double gradScale, const AdamwHyper& h,
                        const GeneratedCall* generated) {
  for (const at::Tensor* t : {&param, &grad, &m, &v}) TORCH_CHECK(t->is_contiguous(), "adamw: an operand is strided");
  const std::array<double, 9> s = onePassScalars(lr, step, gradScale, h);
  // The generated kernel (codegen/optimizer_kernels.h) when the artifact carries one: the same
  // arithmetic, vectorised for this CPU.
  if (generated) {
    const auto fn = reinterpret_cast<AdamwKernelFn>(generated->fn);
    void* buffers[4] = {param.data_ptr(), grad.data_ptr(), m.data_ptr(), v.data_ptr()};
    at::parallel_for(0, param.numel(), 1 << 14,
                     [&](std::int64_t begin, std::int64_t end) { fn(buffers, begin, end, s.data()); });
    return;
  }
  auto run = [&](auto zero) {
    using T = decltype(zero);
    adamwOnePass<T>(param.data_ptr<T>(), grad.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(), param.numel(),
                    static_cast<T>(s[0]), static_cast<T>(s[1]), static_cast<T>(s[2]), static_cast<T>(s[3]),
                    static_cast<T>(s[4]), static_cast<T>(s[5]), static_cast<T>(s[6]), static_cast<T>(s[7]),
                    static_cast<T>(s[8]), gradScale != 1.0, h.weightDecay != 0.0);
  };
  if (param.scalar_type() == at::kDouble) run(0.0);
  else if (param.scalar_type() == at::kFloat) run(0.0f);
  else TORCH_CHECK(false, "adamw {fused = true} updates f32 or f64 parameters, got ", param.scalar_type());
}

// The update of one parameter (or one stretch of one): on the host, in one pass when the node
// is fused; otherwise (and on every other device) op by op, the same arithmetic.
template <bool Host>
void adamwUpdate(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& m, const at::Tensor& v, double lr,
                 std::int64_t step, const GradScale& gradScale, const AdamwHyper& h,
                 const GeneratedCall* generated) {
  if (Host && h.fused) return adamwOnePassUpdate(param, grad, m, v, lr, step, gradScale.value, h, generated);
  at::Tensor g = scaledGrad(grad, gradScale);
  if (h.weightDecay != 0.0) param.mul_(1.0 - lr * h.weightDecay);
  const double biasCorrection1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
  const double biasCorrection2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
  m.mul_(h.beta1).add_(g, 1.0 - h.beta1);
  v.mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
  at::Tensor denom = v.sqrt().div_(std::sqrt(biasCorrection2)).add_(h.eps);
  param.addcdiv_(m, denom, -lr / biasCorrection1);
}

template <bool Host>
Results adamwStepKernel(const KernelArgs& a) {
  adamwUpdate<Host>(a.operands[0], a.operands[1], a.operands[2], a.operands[3], scalarOperand(a, 4),
                    static_cast<std::int64_t>(scalarOperand(a, 5)), GradScale{a.operands[6], scalarOperand(a, 6)},
                    AdamwHyper(a.node), a.generated);
  return {};
}

// ZeRO's sharded updates (ir/ops_shard.cpp), segment by segment (ir/shard_layout.h): each
// stretch of a parameter inside this rank's shard is copied into the result, then updated there
// by the replicated update's arithmetic with the matching stretch of gradient and state. Under
// stage 3 (param_shard) the shard is the parameter operand itself, updated in place.
struct ShardView {
  std::vector<ir::ShardSegment> segments;
  size_t parts = 0;
  bool gradShard = false;
  bool paramShard = false;
  size_t gradAt = 0;   // the first gradient operand
  size_t afterGrads = 0;  // the first operand after the gradients
  std::vector<bool> noDecay;  // per part: updated without weight decay (no_decay_parts)
};

ShardView shardView(const KernelArgs& a) {
  ShardView v;
  v.parts = static_cast<size_t>(intAttr(a.node, "parts"));
  v.gradShard = ir::getBool(a.node.attrs(), "grad_shard").value_or(false);
  v.paramShard = ir::getBool(a.node.attrs(), "param_shard").value_or(false);
  v.gradAt = v.paramShard ? 1 : v.parts;
  v.afterGrads = v.gradAt + (v.gradShard ? 1 : v.parts);
  std::vector<std::int64_t> numels;
  if (v.paramShard) numels = *ir::getIntList(a.node.attrs(), "part_numels");
  else
    for (size_t i = 0; i < v.parts; ++i) numels.push_back(a.operands[i].numel());
  v.segments = ir::shardSegments(numels, intAttr(a.node, "offset"), intAttr(a.node, "shard"));
  v.noDecay.assign(v.parts, false);
  for (std::int64_t part : ir::getIntList(a.node.attrs(), "no_decay_parts").value_or(std::vector<std::int64_t>{})) {
    TORCH_CHECK(part >= 0 && static_cast<size_t>(part) < v.parts, "no_decay_parts: part ", part, " of ", v.parts);
    v.noDecay[static_cast<size_t>(part)] = true;
  }
  return v;
}

// The result with the shard's parameter values (zeros past the bucket's end), and per segment
// the stretches of result, gradient and state it updates; under stage 3, `out` is the parameter
// shard itself, updated where it is.
struct SegmentTensors {
  at::Tensor param, grad;
  std::vector<at::Tensor> state;
  bool noDecay = false;  // the segment's parameter is in no decay group
};

std::vector<SegmentTensors> segmentTensors(const KernelArgs& a, const ShardView& v, const at::Tensor& out,
                                           std::span<const at::Tensor> state) {
  if (!v.paramShard) out.zero_();
  std::vector<SegmentTensors> out_segments;
  for (const ir::ShardSegment& s : v.segments) {
    SegmentTensors t;
    t.param = out.narrow(0, s.shardOffset, s.length);
    if (!v.paramShard) t.param.copy_(a.operands[s.part].view({-1}).narrow(0, s.begin, s.length));
    t.grad = v.gradShard ? a.operands[v.gradAt].narrow(0, s.shardOffset, s.length)
                         : a.operands[v.gradAt + s.part].view({-1}).narrow(0, s.begin, s.length);
    for (const at::Tensor& st : state) t.state.push_back(st.narrow(0, s.shardOffset, s.length));
    t.noDecay = v.noDecay[s.part];
    out_segments.push_back(std::move(t));
  }
  return out_segments;
}

// (params..., grad..., m, v, lr, step, grad_scale)
template <bool Host>
Results adamwShardStepKernel(const KernelArgs& a) {
  const ShardView v = shardView(a);
  const size_t at = v.afterGrads;
  at::Tensor out = v.paramShard ? a.operands[0] : resultBuffer(a);
  const at::Tensor state[2] = {a.operands[at], a.operands[at + 1]};
  const double lr = scalarOperand(a, at + 2);
  const auto step = static_cast<std::int64_t>(scalarOperand(a, at + 3));
  const GradScale scale{a.operands[at + 4], scalarOperand(a, at + 4)};
  const AdamwHyper decaying(a.node);
  AdamwHyper notDecaying = decaying;
  notDecaying.weightDecay = 0.0;
  for (const SegmentTensors& t : segmentTensors(a, v, out, state))
    adamwUpdate<Host>(t.param, t.grad, t.state[0], t.state[1], lr, step, scale,
                t.noDecay ? notDecaying : decaying, nullptr);
  if (v.paramShard) return {};
  return {out};
}

// (params..., grad..., lr, grad_scale[, momentum_buf])
Results sgdShardStepKernel(const KernelArgs& a) {
  const ShardView v = shardView(a);
  const size_t at = v.afterGrads;
  at::Tensor out = v.paramShard ? a.operands[0] : resultBuffer(a);
  std::vector<at::Tensor> state;
  if (a.operands.size() == at + 3) state.push_back(a.operands[at + 2]);
  const double lr = scalarOperand(a, at);
  const GradScale scale{a.operands[at + 1], scalarOperand(a, at + 1)};
  const SgdHyper decaying(a.node);
  SgdHyper notDecaying = decaying;
  notDecaying.weightDecay = 0.0;
  for (const SegmentTensors& t : segmentTensors(a, v, out, state))
    sgdUpdate(t.param, t.grad, lr, scale, t.state.empty() ? at::Tensor() : t.state[0],
              t.noDecay ? notDecaying : decaying);
  if (v.paramShard) return {};
  return {out};
}

const KernelEntry kOptimizer[] = {
    {"global_norm", globalNormKernel},
    {"clip_coef", clipCoefKernel},
    {"lr_schedule", lrScheduleKernel},
    {"sgd_step", sgdStepKernel},
    {"adamw_step", adamwStepKernel<false>},
    {"adamw_shard_step", adamwShardStepKernel<false>},
    {"sgd_shard_step", sgdShardStepKernel},
    {"norm_from_squares", normFromSquaresKernel},
};

// The host's own: AdamW in one pass (the node's `fused`), with its generated kernel when loaded.
const KernelEntry kHostOptimizer[] = {
    {"adamw_step", adamwStepKernel<true>},
    {"adamw_shard_step", adamwShardStepKernel<true>},
};

}  // namespace

std::span<const KernelEntry> optimizerKernels() { return kOptimizer; }
std::span<const KernelEntry> hostOptimizerKernels() { return kHostOptimizer; }

namespace kernel_detail {

std::array<double, 9> adamwOnePassScalars(const KernelArgs& a) {
  return onePassScalars(scalarOperand(a, 4), static_cast<std::int64_t>(scalarOperand(a, 5)), scalarOperand(a, 6),
                        AdamwHyper(a.node));
}

}  // namespace kernel_detail

}  // namespace gradc::runtime
