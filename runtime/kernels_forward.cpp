// Forward kernels (the ops specs lower to), the table lookup and the helpers kernels share.
//
// Shape legend: B batch, T sequence, C classes, D features, N rows = product of leading dims.
#include <ATen/Parallel.h>
#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/add.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mse_loss.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/triu.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>

#include "runtime/counter_rng.h"
#include "runtime/dtype_map.h"
#include "runtime/kernels.h"

namespace gradc::runtime {

// ---- shared helpers ----------------------------------------------------------------------------

namespace kernel_detail {

std::int64_t intAttr(const ir::Node& node, std::string_view key) {
  std::optional<std::int64_t> v = ir::getInt(node.attrs(), key);
  assert(v && "integer attribute missing (the verifier checks the schema)");
  return *v;
}

double floatAttr(const ir::Node& node, std::string_view key) {
  std::optional<double> v = ir::getFloat(node.attrs(), key);
  assert(v && "float attribute missing (the verifier checks the schema)");
  return *v;
}

std::vector<std::int64_t> intListAttr(const ir::Node& node, std::string_view key) {
  std::optional<std::vector<std::int64_t>> v = ir::getIntList(node.attrs(), key);
  assert(v && "int list attribute missing (the verifier checks the schema)");
  return *v;
}

std::int64_t axisAttr(const ir::Node& node, std::string_view key, std::int64_t rank) {
  std::optional<int> axis = ir::normalizeAxis(intAttr(node, key), static_cast<int>(rank));
  assert(axis && "axis out of range (the verifier checks it)");
  return *axis;
}

at::TensorOptions optionsFor(ir::DType dtype) { return at::TensorOptions().dtype(toScalarType(dtype)); }

bool anyStrided(const KernelArgs& a) {
  for (const at::Tensor& t : a.operands)
    if (!t.is_contiguous()) return true;
  return false;
}

at::Tensor freshResult(const KernelArgs& a) {
  const ir::TensorType& t = a.node.result(0)->type();
  return at::empty(t.shape, optionsFor(t.dtype));
}

}  // namespace kernel_detail

const KernelFn* findKernel(std::string_view opName) {
  static const std::map<std::string_view, KernelFn, std::less<>> table = [] {
    std::map<std::string_view, KernelFn, std::less<>> all;
    for (auto part : {forwardKernels(), backwardKernels(), optimizerKernels(), collectiveKernels()})
      for (const KernelEntry& e : part) {
        [[maybe_unused]] bool inserted = all.emplace(e.op, e.fn).second;
        assert(inserted && "an op has two kernels");
      }
    return all;
  }();
  auto it = table.find(opName);
  return it == table.end() ? nullptr : &it->second;
}

namespace {
using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// ---- memory behaviour --------------------------------------------------------------------------
//
// What the memory planner assumes (passes/liveness.h), and these kernels guarantee: a non-view
// op returns fresh, contiguous tensors that share no storage with its operands. Elementwise
// ATen ops would lay their result out like a strided operand (and a later reshape would then
// copy where the planner expects a view), so with a strided operand they write into a fresh
// contiguous tensor instead (the `_out` variants: same arithmetic, same bits).

// ---- elementwise and linear algebra ------------------------------------------------------------

Results addKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::add(a.operands[0], a.operands[1])};
  at::Tensor out = freshResult(a);
  return {at::add_out(out, a.operands[0], a.operands[1])};
}

Results subKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::sub(a.operands[0], a.operands[1])};
  at::Tensor out = freshResult(a);
  return {at::sub_out(out, a.operands[0], a.operands[1])};
}

Results mulKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::mul(a.operands[0], a.operands[1])};
  at::Tensor out = freshResult(a);
  return {at::mul_out(out, a.operands[0], a.operands[1])};
}

Results scaleKernel(const KernelArgs& a) {
  const double factor = floatAttr(a.node, "factor");
  if (!anyStrided(a)) return {at::mul(a.operands[0], factor)};
  at::Tensor out = freshResult(a);
  return {at::mul_out(out, a.operands[0], factor)};
}

// [..., m, k] @ [..., k, n]; at::matmul broadcasts batch dims and folds them into one bmm/mm.
Results matmulKernel(const KernelArgs& a) { return {at::matmul(a.operands[0], a.operands[1])}; }

// x[..., in] @ weight[out, in]^T + bias[out]: what torch.nn.functional.linear runs.
Results linearKernel(const KernelArgs& a) {
  c10::optional<at::Tensor> bias;
  if (a.operands.size() == 3) bias = a.operands[2];
  return {at::linear(a.operands[0], a.operands[1], bias)};
}

// at::relu is at::clamp_min(x, 0), so the strided variant computes the same bits.
Results reluKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::relu(a.operands[0])};
  at::Tensor out = freshResult(a);
  return {at::clamp_min_out(out, a.operands[0], 0)};
}

Results tanhKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::tanh(a.operands[0])};
  at::Tensor out = freshResult(a);
  return {at::tanh_out(out, a.operands[0])};
}

Results sigmoidKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::sigmoid(a.operands[0])};
  at::Tensor out = freshResult(a);
  return {at::sigmoid_out(out, a.operands[0])};
}

Results geluKernel(const KernelArgs& a) {
  std::string approximate = ir::getString(a.node.attrs(), "approximate").value_or("none");
  if (!anyStrided(a)) return {at::gelu(a.operands[0], approximate)};
  at::Tensor out = freshResult(a);
  return {at::gelu_out(out, a.operands[0], approximate)};
}

// ---- normalisation -----------------------------------------------------------------------------

Results softmaxKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  return {at::_softmax(x, axisAttr(a.node, "dim", x.dim()), /*half_to_float=*/false)};
}

Results logSoftmaxKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  return {at::_log_softmax(x, axisAttr(a.node, "dim", x.dim()), /*half_to_float=*/false)};
}

// x[N.., D] -> y[N.., D], mean[N.., 1], rstd[N.., 1]. ATen returns the statistics with the
// normalised dims kept as 1 in this version; the reshape makes the IR type hold regardless.
Results layerNormKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  const std::int64_t d = x.size(-1);
  auto [y, mean, rstd] = at::native_layer_norm(x, {d}, a.operands[1], a.operands[2], floatAttr(a.node, "eps"));
  std::vector<std::int64_t> stats = x.sizes().vec();
  stats.back() = 1;
  return {std::move(y), mean.reshape(stats), rstd.reshape(stats)};
}

// ---- dropout -----------------------------------------------------------------------------------

// Elements per parallel task; fixed, and the mask does not depend on it anyway.
constexpr std::int64_t kDropoutGrain = 1 << 15;
constexpr std::int64_t kDropoutChunk = 1024;

// y[i] = u_i >= p ? x[i] * scale : 0 with u_i from the counter-based RNG. `threshold` is p
// rounded up to the 2^-24 grid of the uniforms, so u >= threshold <=> u >= p exactly.
template <class T>
void dropoutLoop(const T* x, T* y, std::int64_t n, const RngStream& rng, std::int64_t offset, float threshold,
                 T scale) {
  at::parallel_for(0, n, kDropoutGrain, [&](std::int64_t begin, std::int64_t end) {
    float u[kDropoutChunk];
    for (std::int64_t i = begin; i < end; i += kDropoutChunk) {
      const std::int64_t m = std::min(kDropoutChunk, end - i);
      uniformFloats(rng, offset + i, m, u);
      const T* xi = x + i;
      T* yi = y + i;
      for (std::int64_t j = 0; j < m; ++j) yi[j] = u[j] >= threshold ? xi[j] * scale : T(0);
    }
  });
}

// Zero with probability p, scale the rest by 1/(1-p). The mask is keyed by (seed, step, rng),
// so the autodiff pass's gradient (the same op with the same key applied to the upstream
// gradient) uses exactly the forward mask, and recomputation reproduces it. Element i draws
// stream position rng_offset + i, so a data-parallel rank holding rows [r b, (r+1) b) of the
// batch draws exactly those rows of the single-device mask. p = 0 copies (dropout is not a
// view op: its result never aliases its operand).
Results dropoutKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  const double p = floatAttr(a.node, "p");
  if (p == 0.0) return {x.clone(at::MemoryFormat::Contiguous)};
  const RngStream rng{a.ctx.seed, a.ctx.step, intAttr(a.node, "rng")};
  const auto threshold = static_cast<float>(std::ceil(p * 16777216.0) / 16777216.0);
  const double scale = 1.0 / (1.0 - p);
  const std::int64_t n = x.numel();
  const std::int64_t offset = ir::getInt(a.node.attrs(), "rng_offset").value_or(0);
  if (x.scalar_type() == at::kDouble) {
    at::Tensor xc = x.contiguous();
    at::Tensor y = at::empty(x.sizes(), x.options());
    dropoutLoop<double>(xc.data_ptr<double>(), y.data_ptr<double>(), n, rng, offset, threshold, scale);
    return {y};
  }
  // f32, and f16/bf16 computed in f32 (the mask is the same; only the product is rounded).
  at::Tensor xc = x.scalar_type() == at::kFloat ? x.contiguous() : x.to(at::kFloat).contiguous();
  at::Tensor y = at::empty(x.sizes(), xc.options());
  dropoutLoop<float>(xc.data_ptr<float>(), y.data_ptr<float>(), n, rng, offset, threshold,
                     static_cast<float>(scale));
  return {x.scalar_type() == at::kFloat ? y : y.to(x.scalar_type())};
}

// ---- masking and data movement -----------------------------------------------------------------

// x[..., s, t] with -inf where j > i (i indexes s, j indexes t). One bool [s, t] temporary
// (the mask, built in place), and the result.
Results causalMaskKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  at::Tensor above = at::ones({x.size(-2), x.size(-1)}, x.options().dtype(at::kBool)).triu_(1);
  at::Tensor y = x.clone(at::MemoryFormat::Contiguous);
  y.masked_fill_(above, -std::numeric_limits<double>::infinity());
  return {y};
}

Results embeddingKernel(const KernelArgs& a) { return {at::embedding(a.operands[0], a.operands[1])}; }

Results reshapeKernel(const KernelArgs& a) { return {a.operands[0].reshape(intListAttr(a.node, "shape"))}; }

Results transposeKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  return {x.transpose(axisAttr(a.node, "dim0", x.dim()), axisAttr(a.node, "dim1", x.dim()))};
}

Results sliceKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  return {x.slice(axisAttr(a.node, "dim", x.dim()), intAttr(a.node, "start"), intAttr(a.node, "end"))};
}

Results selectKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  return {x.select(axisAttr(a.node, "dim", x.dim()), intAttr(a.node, "index"))};
}

Results splitKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  const std::int64_t dim = axisAttr(a.node, "dim", x.dim());
  return x.split(x.size(dim) / intAttr(a.node, "sections"), dim);
}

Results unbindKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  return x.unbind(axisAttr(a.node, "dim", x.dim()));
}

Results stackKernel(const KernelArgs& a) {
  const std::int64_t dim = axisAttr(a.node, "dim", a.operands[0].dim() + 1);
  return {at::stack(at::TensorList(a.operands.data(), a.operands.size()), dim)};
}

Results zerosKernel(const KernelArgs& a) {
  return {at::zeros(intListAttr(a.node, "shape"), optionsFor(*ir::getDType(a.node.attrs(), "dtype")))};
}

// ---- losses ------------------------------------------------------------------------------------

// logits[..., C], target[...] -> mean over the N = numel(target) rows of -log_softmax[target].
// ATen's cross_entropy_loss = log_softmax (one [N, C] temporary, the op's declared workspace)
// + nll_loss. nll_loss wants i64 class indices. The IR op has no ignored class, so ATen's
// ignore_index (default -100, which would silently skip such targets) is set to a value no
// valid target has: every target outside [0, C) is an error, as in cross_entropy_backward.
constexpr std::int64_t kNoIgnoredClass = std::numeric_limits<std::int64_t>::min();

Results crossEntropyKernel(const KernelArgs& a) {
  const at::Tensor& logits = a.operands[0];
  at::Tensor target = a.operands[1].reshape({-1});
  if (target.scalar_type() != at::kLong) target = target.to(at::kLong);
  return {at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target, /*weight=*/{}, at::Reduction::Mean,
                                 kNoIgnoredClass)};
}

Results mseKernel(const KernelArgs& a) { return {at::mse_loss(a.operands[0], a.operands[1], at::Reduction::Mean)}; }

const KernelEntry kForward[] = {
    {"embedding", embeddingKernel},
    {"add", addKernel},
    {"sub", subKernel},
    {"mul", mulKernel},
    {"scale", scaleKernel},
    {"matmul", matmulKernel},
    {"linear", linearKernel},
    {"relu", reluKernel},
    {"gelu", geluKernel},
    {"tanh", tanhKernel},
    {"sigmoid", sigmoidKernel},
    {"softmax", softmaxKernel},
    {"log_softmax", logSoftmaxKernel},
    {"layer_norm", layerNormKernel},
    {"dropout", dropoutKernel},
    {"causal_mask", causalMaskKernel},
    {"reshape", reshapeKernel},
    {"transpose", transposeKernel},
    {"slice", sliceKernel},
    {"select", selectKernel},
    {"split", splitKernel},
    {"stack", stackKernel},
    {"unbind", unbindKernel},
    {"zeros", zerosKernel},
    {"cross_entropy", crossEntropyKernel},
    {"mse", mseKernel},
};

}  // namespace

std::span<const KernelEntry> forwardKernels() { return kForward; }

}  // namespace gradc::runtime
