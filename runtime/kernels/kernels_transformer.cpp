// Kernels of the LLaMA-style block ops (ir/ops_transformer.cpp): silu, exp, rms_norm and rope,
// with their backwards; and of the reductions sum and mean (ir/ops_reductions.cpp). Every one is a short sequence of ATen `_out` and in-place calls that
// writes into its planned results, so the only memory a kernel allocates is what the op table
// declares as its workspace: none for silu and exp; rms_norm's eps as a wrapped Scalar; two input-sized
// temporaries and a row column for rms_norm's backward; the cos and sin tables for rope.
#include <ATen/core/Tensor.h>
#include <ATen/ops/addcmul.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/sum.h>

#include <cmath>

#include "runtime/kernels/kernels.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

Results siluKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::silu_out(out, a.operands[0])};
}

Results siluBackwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::silu_backward_out(out, a.operands[0], a.operands[1])};
}

Results expKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::exp_out(out, a.operands[0])};
}

// The two reductions of rms_norm and its backward, into planned results. bf16/f16 in the host's
// kernels:
// loops accumulating in float; ATen 2.x's mean and sum convert the whole input to a float copy
// first, memory the plan does not hold (ATen 1.13's did not).
// out[r] = mean of in[r, :] (in [R, D] and out [R, 1] contiguous).
template <bool Host>
void meanOfRowsInto(at::Tensor& out, const at::Tensor& in) {
  if (!Host || !reducedPrecision(in) || !in.is_contiguous() || !out.is_contiguous()) {
    at::mean_out(out, in, {-1}, /*keepdim=*/true);
    return;
  }
  const std::int64_t d = in.size(-1), rows = d == 0 ? 0 : in.numel() / d;
  withReducedType(in.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    const scalar_t* src = in.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      float sum = 0;
      for (std::int64_t c = 0; c < d; ++c) sum += float(src[r * d + c]);
      dst[r] = static_cast<scalar_t>(sum / static_cast<float>(d));
    }
  });
}

// out[c] = sum over rows of in[r, c] (in [R, D] contiguous, out [D] contiguous).
template <bool Host>
void sumOfColumnsInto(at::Tensor& out, const at::Tensor& in) {
  if (!Host || !reducedPrecision(in) || !in.is_contiguous() || !out.is_contiguous()) {
    at::sum_out(out, in, {0});
    return;
  }
  const std::int64_t rows = in.size(0), d = in.size(1);
  withReducedType(in.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    const scalar_t* src = in.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    for (std::int64_t c = 0; c < d; ++c) {
      float sum = 0;
      for (std::int64_t r = 0; r < rows; ++r) sum += float(src[r * d + c]);
      dst[c] = static_cast<scalar_t>(sum);
    }
  });
}

// y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps); y holds x^2 first.
template <bool Host>
Results rmsNormKernel(const KernelArgs& a) {
  const at::Tensor x = a.operands[0].contiguous();
  at::Tensor y = resultBuffer(a, 0), rstd = resultBuffer(a, 1);
  at::mul_out(y, x, x);
  meanOfRowsInto<Host>(rstd, y);
  rstd.add_(floatAttr(a.node, "eps")).rsqrt_();
  at::mul_out(y, x, rstd);
  y.mul_(a.operands[1]);
  return {y, rstd};
}

// xhat = x * rstd; gw = sum over rows of g * xhat; gx = rstd * (g w - xhat * mean(g w xhat)).
// gx holds g * xhat, then g * w, before it is the result.
template <bool Host>
Results rmsNormBackwardKernel(const KernelArgs& a) {
  const at::Tensor g = a.operands[0].contiguous(), x = a.operands[1].contiguous();
  const at::Tensor& rstd = a.operands[2];
  const at::Tensor& w = a.operands[3];
  const std::int64_t d = x.size(-1);
  at::Tensor gx = resultBuffer(a, 0), gw = resultBuffer(a, 1);
  at::Tensor xhat = at::mul(x, rstd);                            // workspace: x's size
  at::mul_out(gx, g, xhat);
  sumOfColumnsInto<Host>(gw, gx.view({-1, d}));
  at::mul_out(gx, g, w);
  at::Tensor dot;
  {
    at::Tensor product = at::mul(gx, xhat);                      // workspace: x's size
    std::vector<std::int64_t> rowShape = product.sizes().vec();
    rowShape.back() = 1;
    dot = at::empty(rowShape, product.options());                // workspace: one value per row
    meanOfRowsInto<Host>(dot, product);
  }
  xhat.mul_(dot);
  gx.sub_(xhat).mul_(rstd);
  return {gx, gw};
}

// Rotates the pairs (i, i + h) of the last axis (h = Dh / 2) by pos * base^(-2i / Dh), pos
// the index along seq_dim; by the opposite angle when `inverse`. The cos and sin tables
// [S, h] are computed in the input's dtype (f32 for bf16 and f16 inputs) and shaped
// to broadcast against the input; the halves of the result are written with _out and
// in-place addcmul, so nothing but the tables is allocated.
Results ropeKernel(const KernelArgs& a) {
  const at::Tensor x = a.operands[0].contiguous();
  const std::int64_t rank = x.dim();
  const std::int64_t seqDim = axisAttr(a.node, "seq_dim", rank);
  const std::int64_t positions = x.size(seqDim), dh = x.size(-1), h = dh / 2;
  const double base = floatAttr(a.node, "base");
  const bool inverse = ir::getBool(a.node.attrs(), "inverse").value_or(false);
  // bf16 and f16 cannot even count positions past 256 exactly: their tables are computed in
  // f32 and converted, as Hugging Face does.
  const bool reduced = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  const at::TensorOptions options = reduced ? x.options().dtype(at::kFloat) : x.options();

  at::Tensor sin;
  at::Tensor cos = at::empty({positions, h}, options);
  {
    at::Tensor pos = at::arange(positions, options);
    at::Tensor inv = at::arange(h, options).mul_(-2.0 * std::log(base) / static_cast<double>(dh)).exp_();
    sin = at::outer(pos, inv);  // the angles, then their sine in place
  }
  at::cos_out(cos, sin);
  sin.sin_();
  if (reduced) {
    cos = cos.to(x.scalar_type());
    sin = sin.to(x.scalar_type());
  }
  // [S, h] -> [S, 1, ..., 1, h]: one axis per axis between seq_dim and the last.
  std::vector<std::int64_t> tableShape(static_cast<size_t>(rank - seqDim), 1);
  tableShape.front() = positions;
  tableShape.back() = h;
  cos = cos.view(tableShape);
  sin = sin.view(tableShape);

  at::Tensor y = resultBuffer(a);
  const at::Tensor x1 = x.narrow(-1, 0, h), x2 = x.narrow(-1, h, h);
  at::Tensor y1 = y.narrow(-1, 0, h), y2 = y.narrow(-1, h, h);
  const double s = inverse ? -1.0 : 1.0;
  at::mul_out(y1, x1, cos);
  y1.addcmul_(x2, sin, -s);
  at::mul_out(y2, x2, cos);
  y2.addcmul_(x1, sin, s);
  return {y};
}

// sum and mean over the node's dims (empty: every axis), straight into the result.
std::vector<std::int64_t> reducedDims(const KernelArgs& a) {
  std::vector<std::int64_t> dims = intListAttr(a.node, "dims");
  if (dims.empty())
    for (std::int64_t d = 0; d < a.operands[0].dim(); ++d) dims.push_back(d);
  return dims;
}

Results sumKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::sum_out(out, a.operands[0], reducedDims(a), ir::getBool(a.node.attrs(), "keepdim").value_or(false))};
}

Results meanKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::mean_out(out, a.operands[0], reducedDims(a), ir::getBool(a.node.attrs(), "keepdim").value_or(false))};
}

const KernelEntry kTransformer[] = {
    {"sum", sumKernel},
    {"mean", meanKernel},
    {"silu", siluKernel},
    {"silu_backward", siluBackwardKernel},
    {"exp", expKernel},
    {"rms_norm", rmsNormKernel<false>},
    {"rms_norm_backward", rmsNormBackwardKernel<false>},
    {"rope", ropeKernel},
};

// The host's own: rms_norm's reductions loop in float for bf16/f16.
const KernelEntry kHostTransformer[] = {
    {"rms_norm", rmsNormKernel<true>},
    {"rms_norm_backward", rmsNormBackwardKernel<true>},
};

}  // namespace

std::span<const KernelEntry> transformerKernels() { return kTransformer; }
std::span<const KernelEntry> hostTransformerKernels() { return kHostTransformer; }

}  // namespace gradc::runtime
