// Forward kernels (the ops specs lower to), the table lookup and the helpers kernels share.
//
// Shape legend: B batch, T sequence, C classes, D features, N rows = product of leading dims.
#include <ATen/Parallel.h>
#include <ATen/core/Reduction.h>
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include "runtime/kernels/aten_layer_norm.h"
#include "runtime/kernels/low_precision_products.h"
#include "runtime/kernels/row_blocked_products.h"
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/add.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/nll_loss_forward.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/mean.h>
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

#include "runtime/device/device.h"
#include "runtime/core/counter_rng.h"
#include "runtime/core/dtype_map.h"
#include "runtime/core/step_scalars.h"
#include "runtime/kernels/kernels.h"

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

at::TensorOptions optionsFor(const KernelArgs& a, ir::DType dtype) {
  return (a.ctx.device ? *a.ctx.device : cpuDevice()).options(dtype);
}

at::Tensor resultBuffer(const KernelArgs& a, size_t i) {
  if (i < a.outs.size() && a.outs[i].defined()) return a.outs[i];
  const ir::TensorType& t = a.node.result(i)->type();
  return at::empty(t.shape, optionsFor(a, t.dtype));
}

double scalarOperand(const KernelArgs& a, size_t i) {
  if (a.ctx.scalars) return a.ctx.scalars->value(a.node.operand(i), a.operands[i]);
  return a.operands[i].item<double>();
}

DropoutMask dropoutMask(const KernelArgs& a) {
  DropoutMask m;
  m.p = floatAttr(a.node, "p");
  m.rng = RngStream{a.ctx.seed, a.ctx.step, intAttr(a.node, "rng")};
  m.threshold = dropoutThreshold(m.p);
  m.scale = 1.0 / (1.0 - m.p);
  m.offset = ir::getInt(a.node.attrs(), "rng_offset").value_or(0);
  return m;
}

}  // namespace kernel_detail

namespace {
using Table = std::map<std::string_view, KernelFn, std::less<>>;

// One entry per op from the parts, checked to cover each op at most once.
Table tableOf(std::initializer_list<std::span<const KernelEntry>> parts) {
  Table all;
  for (auto part : parts)
    for (const KernelEntry& e : part) {
      [[maybe_unused]] bool inserted = all.emplace(e.op, e.fn).second;
      assert(inserted && "an op has two kernels in one layer");
    }
  return all;
}
}  // namespace

const KernelFn* findPortableKernel(std::string_view opName) {
  static const Table table = tableOf({forwardKernels(), backwardKernels(), optimizerKernels(), collectiveKernels(),
                                      fusedLossKernels(), transformerKernels(), convKernels(), convDeviceKernels(),
                                      attentionKernels()});
  auto it = table.find(opName);
  return it == table.end() ? nullptr : &it->second;
}

// The CPU device runs the host's kernels (runtime/device/device.h).
std::span<const KernelEntry> CpuDevice::kernels() const { return hostKernels(); }

std::span<const KernelEntry> hostKernels() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> v;
    for (auto part : {hostForwardKernels(), hostBackwardKernels(), hostOptimizerKernels(), hostFusedLossKernels(),
                      hostTransformerKernels(), hostFusedKernels(), hostConvKernels(), hostBatchNormKernels(),
                      hostAttentionKernels(), hostLayerNormKernels(), hostSoftmaxKernels(), hostGeluKernels()})
      v.insert(v.end(), part.begin(), part.end());
    (void)tableOf({v});  // each op once
    return v;
  }();
  return all;
}

const KernelFn* findKernel(std::string_view opName, const Device& device) {
  for (const KernelEntry& e : device.kernels())
    if (e.op == opName) return &e.fn;
  return findPortableKernel(opName);
}

const KernelFn* findKernel(std::string_view opName) { return findKernel(opName, cpuDevice()); }

namespace {
using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// ---- memory behaviour --------------------------------------------------------------------------
//
// What the memory planner assumes (passes/memory/storage.h), and these kernels guarantee: a non-view
// op writes its results into resultBuffer() -- the planned arena buffer, or a fresh tensor --
// contiguous, sharing no storage with its operands. The `_out` variants run the same
// arithmetic as the functional ATen ops (same TensorIterator loops, same bits) and read
// strided operands in place.

// ---- elementwise and linear algebra ------------------------------------------------------------

Results addKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::add_out(out, a.operands[0], a.operands[1])}; }

Results subKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::sub_out(out, a.operands[0], a.operands[1])}; }

Results mulKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::mul_out(out, a.operands[0], a.operands[1])}; }

// The factor as ATen wraps a Scalar operand: a 0-dim f64 "wrapped number" (8 bytes of
// workspace), so the product is computed in the operand's dtype, as at::mul(x, factor) does.
Results scaleKernel(const KernelArgs& a) {
  at::Tensor factor = at::scalar_tensor(floatAttr(a.node, "factor"), at::TensorOptions().dtype(at::kDouble));
  factor.unsafeGetTensorImpl()->set_wrapped_number(true);
  at::Tensor out = resultBuffer(a);
  return {at::mul_out(out, a.operands[0], factor)};
}

// [..., m, k] @ [..., k, n]; at::matmul_out broadcasts batch dims and folds them into one bmm/mm.
// The host's: a contiguous x times a plain matrix (x @ W: linear's input gradient) is folded
// here, into one product over x's rows in row blocks (runtime/kernels/row_blocked_products.h); bf16
// and f16 folded the same way, with their planned temporaries (runtime/kernels/low_precision_products.h).
Results matmulKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::matmul_out(out, a.operands[0], a.operands[1])};
}

Results hostMatmulKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  if (lowPrecisionMatmul(a.node, a.operands[0], a.operands[1], out)) return {out};
  const at::Tensor& x = a.operands[0];
  const at::Tensor& rhs = a.operands[1];
  if (rhs.dim() == 2 && x.dim() >= 2 && x.is_contiguous()) {
    productInRowBlocks(out.view({-1, rhs.size(1)}), x.view({-1, x.size(-1)}), rhs);
    return {out};
  }
  return {at::matmul_out(out, x, rhs)};
}

// x[..., in] @ weight[out, in]^T + bias[out], as torch.nn.functional.linear computes it for a
// contiguous input: one addmm (mm without bias) over the flattened rows (on the host in row
// blocks, runtime/kernels/row_blocked_products.h). A strided input is flattened by a copy (the
// planner's hidden copy of linear). bf16 and f16 on the host: with their planned temporaries
// (runtime/kernels/low_precision_products.h), every strided operand copied first (the op reads
// strided operands Copied).
template <bool Host>
Results linearKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  const at::Tensor& w = a.operands[1];
  at::Tensor out = resultBuffer(a);
  at::Tensor out2d = out.view({-1, w.size(0)});
  const at::Tensor* bias = a.operands.size() == 3 ? &a.operands[2] : nullptr;
  at::Tensor x2d = x.dim() == 2 ? x : x.reshape({-1, x.size(-1)});
  if constexpr (Host) {
    // x2d is already the flattening copy of a strided 3-D x: at most one copy either way.
    if ((x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) &&
        lowPrecisionProduct2d(a.node, x2d.contiguous(), w.contiguous().t(), bias, out2d))
      return {out};
    productInRowBlocks(out2d, x2d, w.t(), bias);
  } else if (bias) {
    at::addmm_out(out2d, *bias, x2d, w.t());
  } else {
    at::mm_out(out2d, x2d, w.t());
  }
  return {out};
}

// at::relu is at::clamp_min(x, 0): the same bits.
Results reluKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::clamp_min_out(out, a.operands[0], 0)}; }

Results tanhKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::tanh_out(out, a.operands[0])}; }

Results sigmoidKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::sigmoid_out(out, a.operands[0])}; }

Results geluKernel(const KernelArgs& a) {
  std::string approximate = ir::getString(a.node.attrs(), "approximate").value_or("none");
  at::Tensor out = resultBuffer(a);
  return {at::gelu_out(out, a.operands[0], approximate)};
}

// ---- normalisation -----------------------------------------------------------------------------

Results softmaxKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  at::Tensor out = resultBuffer(a);
  return {at::_softmax_out(out, x, axisAttr(a.node, "dim", x.dim()), /*half_to_float=*/false)};
}

Results logSoftmaxKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  at::Tensor out = resultBuffer(a);
  return {at::_log_softmax_out(out, x, axisAttr(a.node, "dim", x.dim()), /*half_to_float=*/false)};
}

// x[N.., D] -> y[N.., D], mean[N.., 1], rstd[N.., 1]: ATen's layer-norm kernel for the device
// (what at::native_layer_norm runs), writing straight into the three results. The statistics
// are N contiguous values, which [N.., 1] tensors are. F32Statistics: a device whose kernel keeps
// the statistics of f16/bf16 data in f32 (CUDA's), where the IR gives them the data's type.
template <bool F32Statistics>
Results layerNormKernel(const KernelArgs& a) {
  const at::Tensor x = a.operands[0].contiguous();
  const std::int64_t d = x.size(-1);
  const std::int64_t rows = d == 0 ? 0 : x.numel() / d;
  at::Tensor y = resultBuffer(a, 0), mean = resultBuffer(a, 1), rstd = resultBuffer(a, 2);
  if (rows == 0) return {y, mean, rstd};
  // Statistics the device keeps in f32 are computed there, then rounded into the results.
  const bool widened = F32Statistics && reducedPrecision(x);
  at::Tensor m = widened ? at::empty(mean.sizes(), mean.options().dtype(at::kFloat)) : mean;
  at::Tensor r = widened ? at::empty(rstd.sizes(), rstd.options().dtype(at::kFloat)) : rstd;
  at::native::LayerNormKernel(x.device().type(), x, a.operands[1].contiguous(), a.operands[2].contiguous(), rows, d,
                              floatAttr(a.node, "eps"), &y, &m, &r);
  if (widened) {
    mean.copy_(m);
    rstd.copy_(r);
  }
  return {y, mean, rstd};
}

// ---- dropout -----------------------------------------------------------------------------------

// Elements per parallel task; fixed, and the mask does not depend on it anyway.
constexpr std::int64_t kDropoutGrain = 1 << 15;
constexpr std::int64_t kDropoutChunk = 1024;

// y[i] = u_i >= p ? x[i] * scale : 0 with u_i from the counter-based RNG. `threshold` is p
// rounded up to the 2^-24 grid of the uniforms, so u >= threshold <=> u >= p exactly.
// The product is computed in C (float for f16 and bf16) and rounded once into T.
template <class T, class C = T>
void dropoutLoop(const T* x, T* y, std::int64_t n, const RngStream& rng, std::int64_t offset, float threshold,
                 C scale) {
  at::parallel_for(0, n, kDropoutGrain, [&](std::int64_t begin, std::int64_t end) {
    float u[kDropoutChunk];
    for (std::int64_t i = begin; i < end; i += kDropoutChunk) {
      const std::int64_t m = std::min(kDropoutChunk, end - i);
      uniformFloats(rng, offset + i, m, u);
      const T* xi = x + i;
      T* yi = y + i;
      for (std::int64_t j = 0; j < m; ++j) yi[j] = u[j] >= threshold ? T(static_cast<C>(xi[j]) * scale) : T(0);
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
  at::Tensor y = resultBuffer(a);
  const DropoutMask mask = dropoutMask(a);
  if (mask.p == 0.0) return {y.copy_(x)};
  const RngStream& rng = mask.rng;
  const float threshold = mask.threshold;
  const double scale = mask.scale;
  const std::int64_t n = x.numel(), offset = mask.offset;
  if (x.scalar_type() == at::kDouble) {
    at::Tensor xc = x.contiguous();
    dropoutLoop<double>(xc.data_ptr<double>(), y.data_ptr<double>(), n, rng, offset, threshold, scale);
    return {y};
  }
  if (x.scalar_type() == at::kFloat) {
    at::Tensor xc = x.contiguous();
    dropoutLoop<float>(xc.data_ptr<float>(), y.data_ptr<float>(), n, rng, offset, threshold,
                       static_cast<float>(scale));
    return {y};
  }
  // f16/bf16: each product computed in f32 and rounded into the result (the mask is the same),
  // with no f32 copy of the tensor.
  at::Tensor xc = x.contiguous();
  TORCH_CHECK(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16, "dropout: unsupported dtype ",
              x.scalar_type());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "dropout", [&] {
    dropoutLoop<scalar_t, float>(xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n, rng, offset, threshold,
                                 static_cast<float>(scale));
  });
  return {y};
}

// ---- masking and data movement -----------------------------------------------------------------

// x[..., s, t] with -inf where j > i (i indexes s, j indexes t). One bool [s, t] temporary
// (the mask, built in place), and the result.
Results causalMaskKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  at::Tensor above = at::ones({x.size(-2), x.size(-1)}, x.options().dtype(at::kBool)).triu_(1);
  at::Tensor y = resultBuffer(a).copy_(x);
  y.masked_fill_(above, -std::numeric_limits<double>::infinity());
  return {y};
}

// weight[num, D], indices[...] -> [..., D]: the rows, as at::embedding gathers them (index_select).
Results embeddingKernel(const KernelArgs& a) {
  const at::Tensor& weight = a.operands[0];
  at::Tensor out = resultBuffer(a);
  at::Tensor rows = out.view({-1, weight.size(1)});
  at::index_select_out(rows, weight, 0, a.operands[1].reshape({-1}));
  return {out};
}

// A view when ATen's stride rule allows one (then the plan gives it no buffer of its own);
// otherwise a copy into the planned buffer, element order as reshape defines it.
Results reshapeKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  if (a.outs.empty() || !a.outs[0].defined()) return {x.reshape(intListAttr(a.node, "shape"))};
  at::Tensor out = a.outs[0];
  out.view(x.sizes()).copy_(x);
  return {out};
}

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
  at::Tensor out = resultBuffer(a);
  return {at::stack_out(out, at::TensorList(a.operands.data(), a.operands.size()), dim)};
}

Results zerosKernel(const KernelArgs& a) { return {resultBuffer(a).zero_()}; }

// ---- losses ------------------------------------------------------------------------------------

// logits[..., C], target[...] -> mean over the N = numel(target) rows of -log_softmax[target].
// As ATen's cross_entropy_loss: log_softmax (one [N, C] temporary) + nll_loss, whose total
// weight is a 0-dim temporary (both the op's declared workspace). nll_loss wants i64 class
// indices. Without the op's ignore_index, ATen's (default -100, which would silently skip such
// targets) is set to a value no valid target has: every target outside [0, C) is an error, as
// in cross_entropy_backward. With it, nll_loss averages over the other rows (total weight =
// their count; all rows ignored gives 0 / 0 = nan, as PyTorch).
constexpr std::int64_t kNoIgnoredClass = std::numeric_limits<std::int64_t>::min();

// With label smoothing eps (PyTorch's): the row term is (1 - eps) (-logp[t]) + eps mean_c(-logp[c]),
// averaged over the rows not ignored; summed in f64 on the host from the log-probabilities.
// The host's reads the log-probabilities through raw pointers; the portable one takes the same
// sums as ATen reductions.
template <bool Host>
at::Tensor smoothedCrossEntropy(at::Tensor out, const at::Tensor& logp, const at::Tensor& target, std::int64_t ignore,
                                double eps) {
  const std::int64_t rows = logp.size(0), classes = logp.size(1);
  if constexpr (!Host) {
    const at::Tensor kept = target.ne(ignore);
    TORCH_CHECK(!kept.logical_and(target.lt(0).logical_or(target.ge(classes))).any().item<bool>(),
                "cross_entropy: a target is not a class in [0, ", classes, ")");
    const at::Tensor lp = logp.to(at::kDouble);
    const at::Tensor picked = lp.gather(1, target.masked_fill(kept.logical_not(), 0).unsqueeze(1)).squeeze(1);
    const at::Tensor terms = picked.mul(-(1.0 - eps)).sub(lp.sum(1).mul(eps / static_cast<double>(classes)));
    return out.copy_(terms.masked_fill(kept.logical_not(), 0).sum().div(kept.sum()));  // none kept: nan
  } else {
    const std::int64_t* t = target.data_ptr<std::int64_t>();
    double total = 0;
    std::int64_t count = 0;
    AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, logp.scalar_type(), "cross_entropy", [&] {
      const scalar_t* row = logp.data_ptr<scalar_t>();
      for (std::int64_t r = 0; r < rows; ++r, row += classes) {
        if (t[r] == ignore) continue;
        TORCH_CHECK(t[r] >= 0 && t[r] < classes, "cross_entropy: target ", t[r], " is not a class in [0, ", classes,
                    ")");
        double sum = 0;
        for (std::int64_t c = 0; c < classes; ++c) sum += static_cast<double>(row[c]);
        total += -(1.0 - eps) * static_cast<double>(row[t[r]]) - eps * sum / static_cast<double>(classes);
        ++count;
      }
    });
    return out.fill_(total / static_cast<double>(count));  // count 0: nan, as PyTorch
  }
}

template <bool Host>
Results crossEntropyKernel(const KernelArgs& a) {
  const at::Tensor& logits = a.operands[0];
  at::Tensor target = a.operands[1].reshape({-1});
  if (target.scalar_type() != at::kLong) target = target.to(at::kLong);
  at::Tensor logp = at::_log_softmax(logits.reshape({-1, logits.size(-1)}), 1, /*half_to_float=*/false);
  at::Tensor out = resultBuffer(a);
  const std::int64_t ignore = ir::getInt(a.node.attrs(), "ignore_index").value_or(kNoIgnoredClass);
  if (const double eps = ir::getFloat(a.node.attrs(), "label_smoothing").value_or(0.0); eps > 0)
    return {smoothedCrossEntropy<Host>(out, logp, target.contiguous(), ignore, eps)};
  at::Tensor totalWeight = at::empty({}, logp.options());
  at::nll_loss_forward_out(out, totalWeight, logp, target, /*weight=*/{}, at::Reduction::Mean, ignore);
  return {out};
}

// mean((x - y)^2), as at::mse_loss computes it: the squared differences into one temporary of
// the operands' size (the op's declared workspace), then their mean into the result.
Results mseKernel(const KernelArgs& a) {
  at::Tensor squared = at::mse_loss(a.operands[0], a.operands[1], at::Reduction::None);
  at::Tensor out = resultBuffer(a);
  return {at::mean_out(out, squared, at::IntArrayRef{}, /*keepdim=*/false)};
}

const KernelEntry kForward[] = {
    {"embedding", embeddingKernel},
    {"add", addKernel},
    {"sub", subKernel},
    {"mul", mulKernel},
    {"scale", scaleKernel},
    {"matmul", matmulKernel},
    {"linear", linearKernel<false>},
    {"relu", reluKernel},
    {"gelu", geluKernel},
    {"tanh", tanhKernel},
    {"sigmoid", sigmoidKernel},
    {"softmax", softmaxKernel},
    {"log_softmax", logSoftmaxKernel},
    {"layer_norm", layerNormKernel<false>},
    {"causal_mask", causalMaskKernel},
    {"reshape", reshapeKernel},
    {"transpose", transposeKernel},
    {"slice", sliceKernel},
    {"select", selectKernel},
    {"split", splitKernel},
    {"stack", stackKernel},
    {"unbind", unbindKernel},
    {"zeros", zerosKernel},
    {"cross_entropy", crossEntropyKernel<false>},
    {"mse", mseKernel},
};

// The host's own: its dropout loop (no portable dropout exists: a device brings its own),
// low-precision and row-blocked products, and the smoothed loss read through raw pointers.
const KernelEntry kHostForward[] = {
    {"matmul", hostMatmulKernel},
    {"linear", linearKernel<true>},
    {"dropout", dropoutKernel},
    {"cross_entropy", crossEntropyKernel<true>},
};

}  // namespace

const KernelEntry kF32Statistics[] = {{"layer_norm", layerNormKernel<true>}};

std::span<const KernelEntry> forwardKernels() { return kForward; }
std::span<const KernelEntry> layerNormF32StatisticsKernels() { return kF32Statistics; }
std::span<const KernelEntry> hostForwardKernels() { return kHostForward; }

}  // namespace gradc::runtime
