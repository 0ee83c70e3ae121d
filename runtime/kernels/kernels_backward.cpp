// Backward kernels (created by the autodiff pass): mostly one-to-one with the ATen backward
// kernels that LibTorch autograd runs, so gradients match autograd closely.
//
// Shape legend: N rows = product of leading dims, C classes, D features, in/out linear sizes.
#include <utility>
#include <ATen/core/Reduction.h>
#include <ATen/Dispatch.h>
#include <limits>
#include <algorithm>
#include <cmath>
#include <ATen/core/Tensor.h>
#include "runtime/kernels/aten_layer_norm.h"
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/embedding_dense_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mse_loss_backward.h>
#include <ATen/ops/native_layer_norm_backward.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/select_backward.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/slice_backward.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/ops/triu.h>

#include "runtime/device/device.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/host_products.h"
#include "runtime/kernels/low_precision_products.h"

namespace gradc::runtime {
namespace {
using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// Memory behaviour, as in kernels_forward.cpp: results are fresh contiguous tensors that share
// no storage with the operands; elementwise kernels with a strided operand write into a fresh
// contiguous result (anyStrided/freshResult; the `_out` variants compute the same bits).

// x -> sum over the axes broadcasting expanded, down to `shape`: the leading axes x has beyond
// `shape`, and the axes where `shape` is 1 and x is not (at::sum_to's reduction, keepdim, into
// the result). A sum_to that reduces nothing (never emitted by autodiff) copies.
Results sumToKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  std::vector<std::int64_t> shape = intListAttr(a.node, "shape");
  at::Tensor out = resultBuffer(a);
  const std::int64_t leading = x.dim() - static_cast<std::int64_t>(shape.size());
  std::vector<std::int64_t> dims, kept(static_cast<size_t>(leading), 1);
  for (std::int64_t i = 0; i < leading; ++i) dims.push_back(i);
  for (size_t i = 0; i < shape.size(); ++i) {
    kept.push_back(shape[i]);
    if (shape[i] == 1 && x.size(leading + static_cast<std::int64_t>(i)) != 1) dims.push_back(leading + static_cast<std::int64_t>(i));
  }
  if (dims.empty()) return {out.view(x.sizes()).copy_(x)};
  at::Tensor keptView = out.view(kept);
  at::sum_out(keptView, x, dims, /*keepdim=*/true);
  return {out};
}

// (grad, y): grad where y > 0, else 0 -- autograd's relu backward, on the saved output.
Results reluBackwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::threshold_backward_out(out, a.operands[0], a.operands[1], 0)};
}

// (grad, x): grad * gelu'(x), for the same approximation as the forward.
Results geluBackwardKernel(const KernelArgs& a) {
  std::string approximate = ir::getString(a.node.attrs(), "approximate").value_or("none");
  at::Tensor out = resultBuffer(a);
  return {at::gelu_backward_out(out, a.operands[0], a.operands[1], approximate)};
}

Results tanhBackwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::tanh_backward_out(out, a.operands[0], a.operands[1])};
}

Results sigmoidBackwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::sigmoid_backward_out(out, a.operands[0], a.operands[1])};
}

// (grad, y = softmax(x)): y * (grad - sum(grad * y, dim)). ATen's kernel; a device whose ATen
// kernel allocates beside the plan (CUDA's materialises grad * y) registers its own.
Results softmaxBackwardKernel(const KernelArgs& a) {
  const at::Tensor& y = a.operands[1];
  at::Tensor out = resultBuffer(a);
  return {at::_softmax_backward_data_out(out, a.operands[0], y, axisAttr(a.node, "dim", y.dim()),
                                         y.scalar_type())};
}

// (grad, y = log_softmax(x)): grad - exp(y) * sum(grad, dim).
Results logSoftmaxBackwardKernel(const KernelArgs& a) {
  const at::Tensor& y = a.operands[1];
  at::Tensor out = resultBuffer(a);
  return {at::_log_softmax_backward_data_out(out, a.operands[0], y, axisAttr(a.node, "dim", y.dim()),
                                             y.scalar_type())};
}

// (grad[N.., D], x[N.., D], mean[N.., 1], rstd[N.., 1], weight[D], bias[D])
//   -> grad_x[N.., D], grad_weight[D], grad_bias[D]: ATen's CPU layer-norm backward kernel (what
// at::native_layer_norm_backward runs), writing straight into the three results. It reads the
// statistics as N contiguous values, which [N.., 1] tensors are.
// F32Statistics: as layer_norm's kernel (kernels_forward.cpp), the statistics widened for a
// device whose kernel reads f16/bf16 data's statistics in f32.
template <bool F32Statistics>
Results layerNormBackwardKernel(const KernelArgs& a) {
  const at::Tensor dy = a.operands[0].contiguous();
  const at::Tensor x = a.operands[1].contiguous();
  const std::int64_t d = x.size(-1);
  const std::int64_t rows = d == 0 ? 0 : x.numel() / d;
  at::Tensor gx = resultBuffer(a, 0), gw = resultBuffer(a, 1), gb = resultBuffer(a, 2);
  if (rows == 0) {
    gw.zero_();
    gb.zero_();
    return {gx, gw, gb};
  }
  const bool widened = F32Statistics && reducedPrecision(x);
  const at::Tensor mean = widened ? a.operands[2].to(at::kFloat) : a.operands[2].contiguous();
  const at::Tensor rstd = widened ? a.operands[3].to(at::kFloat) : a.operands[3].contiguous();
  // ATen's CUDA kernel (2.x) may replace a result handle with a tensor of its own when it reduces
  // the weight and bias gradients in blocks over many rows: those are copied into the planned
  // buffers (a temporary of ATen's, counted with its other device allocations).
  at::Tensor outGx = gx, outGw = gw, outGb = gb;
  at::native::LayerNormBackwardKernel(x.device().type(), dy, x, mean, rstd, a.operands[4].contiguous(), rows, d, &outGx,
                                      &outGw, &outGb);
  for (auto [planned, written] : {std::pair{gx, outGx}, std::pair{gw, outGw}, std::pair{gb, outGb}})
    if (!written.is_same(planned)) planned.copy_(written);
  return {gx, gw, gb};
}

// One bool [s, t] temporary (the mask), and the result.
Results causalMaskBackwardKernel(const KernelArgs& a) {
  const at::Tensor& g = a.operands[0];
  at::Tensor above = at::ones({g.size(-2), g.size(-1)}, g.options().dtype(at::kBool)).triu_(1);
  at::Tensor y = resultBuffer(a).copy_(g);
  y.masked_fill_(above, 0);
  return {y};
}

// Zeros with the gradient copied into the sliced (selected) part, as at::slice_backward
// (at::select_backward) computes it.
Results sliceBackwardKernel(const KernelArgs& a) {
  std::vector<std::int64_t> shape = intListAttr(a.node, "input_shape");
  const auto rank = static_cast<std::int64_t>(shape.size());
  at::Tensor out = resultBuffer(a).zero_();
  out.slice(axisAttr(a.node, "dim", rank), intAttr(a.node, "start"), intAttr(a.node, "end")).copy_(a.operands[0]);
  return {out};
}

Results selectBackwardKernel(const KernelArgs& a) {
  std::vector<std::int64_t> shape = intListAttr(a.node, "input_shape");
  const auto rank = static_cast<std::int64_t>(shape.size());
  at::Tensor out = resultBuffer(a).zero_();
  out.select(axisAttr(a.node, "dim", rank), intAttr(a.node, "index")).copy_(a.operands[0]);
  return {out};
}

Results concatKernel(const KernelArgs& a) {
  const std::int64_t dim = axisAttr(a.node, "dim", a.operands[0].dim());
  at::Tensor out = resultBuffer(a);
  return {at::cat_out(out, at::TensorList(a.operands.data(), a.operands.size()), dim)};
}

// (grad[..., D], indices[...]) -> [num, D]: rows of grad summed per index, in index order
// (repeats add up), as embedding_dense_backward sums them.
// bf16/f16 on the host: a loop adding each row in the result's type, in index order (what ATen
// 1.13's index_add_ does); ATen 2.x's index_add_ accumulates in a float copy of the whole result,
// memory the plan does not hold.
template <bool Host>
Results embeddingBackwardKernel(const KernelArgs& a) {
  const at::Tensor& grad = a.operands[0];
  at::Tensor out = resultBuffer(a).zero_();
  const at::Tensor indices = a.operands[1].reshape({-1}), rows = grad.reshape({-1, grad.size(-1)});
  const bool wide = indices.scalar_type() == at::kLong;
  if (!Host || !reducedPrecision(out) || !out.is_contiguous() || (!wide && indices.scalar_type() != at::kInt)) {
    out.index_add_(0, indices, rows);
    return {out};
  }
  const std::int64_t num = out.size(0), d = out.size(1), n = rows.size(0), step = indices.stride(0);
  const std::int64_t* wideIndex = wide ? indices.data_ptr<std::int64_t>() : nullptr;
  const std::int32_t* narrowIndex = wide ? nullptr : indices.data_ptr<std::int32_t>();
  const auto indexAt = [&](std::int64_t i) -> std::int64_t { return wide ? wideIndex[i * step] : narrowIndex[i * step]; };
  withReducedType(out.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    scalar_t* o = out.data_ptr<scalar_t>();
    const scalar_t* g = rows.data_ptr<scalar_t>();
    const std::int64_t gRow = rows.stride(0), gCol = rows.stride(1);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t row = indexAt(i);
      TORCH_CHECK(row >= 0 && row < num, "embedding_backward: index ", row, " is out of range [0, ", num, ")");
      scalar_t* dst = o + row * d;
      for (std::int64_t c = 0; c < d; ++c) dst[c] = static_cast<scalar_t>(float(dst[c]) + float(g[i * gRow + c * gCol]));
    }
  });
  return {out};
}

// Softmax of each row of `logits` ([rows, C], read through its strides) into `result` ([rows, C],
// contiguous). bf16/f16 on the host: per row, the maximum and the sum of exponentials in float,
// so no float copy of more than a row is made whatever the LibTorch version (its bf16 and f16
// kernels also compute in float).
template <bool Host>
void softmaxRows(at::Tensor& result, const at::Tensor& logits) {
  if (!Host || !reducedPrecision(result) || !result.is_contiguous()) {
    at::_softmax_out(result, logits, 1, /*half_to_float=*/false);
    return;
  }
  const std::int64_t rows = result.size(0), classes = result.size(1);
  withReducedType(result.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    const scalar_t* in = logits.data_ptr<scalar_t>();
    scalar_t* out = result.data_ptr<scalar_t>();
    const std::int64_t inRow = logits.stride(0), inCol = logits.stride(1);
    for (std::int64_t r = 0; r < rows; ++r) {
      const scalar_t* x = in + r * inRow;
      float top = -std::numeric_limits<float>::infinity();
      for (std::int64_t c = 0; c < classes; ++c) top = std::max(top, float(x[c * inCol]));
      float sum = 0;
      for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(float(x[c * inCol]) - top);
      const float scale = 1.0f / sum;
      for (std::int64_t c = 0; c < classes; ++c)
        out[r * classes + c] = static_cast<scalar_t>(std::exp(float(x[c * inCol]) - top) * scale);
    }
  });
}

// (grad[], logits[N.., C], target[N..]) -> grad * (softmax(logits) - onehot(target)) / N.
// Computed in place in the result: softmax, subtract 1 at the targets, scale. No [N, C]
// temporary beyond the result (the op table's declared workspace is an upper bound). Autograd
// computes the same quantity as log_softmax_backward(nll_loss_backward(...)); the two differ by
// rounding only (exp(log_softmax) vs softmax), well under 1e-6 relative.
// With ignore_index or label smoothing eps: softmax in the result, then one pass over the rows:
// an ignored row is zeroed, any other row gets -(1 - eps) at its target and -eps / C everywhere,
// and is scaled by grad / count (count = the rows not ignored). The loop reads the target on the
// host (this kernel is the CPU one).
template <bool Host>
at::Tensor crossEntropyBackwardRows(at::Tensor result, const at::Tensor& grad, const at::Tensor& target,
                                    std::int64_t ignore, double eps) {
  const std::int64_t rows = result.size(0), classes = result.size(1);
  if constexpr (!Host) {  // the portable kernel: the same rows with ATen ops
    const at::Tensor kept = target.ne(ignore);  // [rows, 1]
    TORCH_CHECK(!kept.logical_and(target.lt(0).logical_or(target.ge(classes))).any().item<bool>(),
                "cross_entropy_backward: a target is not a class in [0, ", classes, ") (nor the ignore_index ",
                ignore, ")");
    const at::Tensor factor = grad.to(at::kDouble).div(kept.sum());  // none kept: nan, as the loss
    result.sub_(eps / static_cast<double>(classes));
    result.scatter_add_(1, target.masked_fill(kept.logical_not(), 0), at::full({rows, 1}, -(1.0 - eps), result.options()));
    return result.mul_(factor).masked_fill_(kept.logical_not(), 0);
  }
  const std::int64_t* t = target.data_ptr<std::int64_t>();
  std::int64_t count = 0;
  for (std::int64_t r = 0; r < rows; ++r) count += t[r] != ignore;
  const double factor = grad.item<double>() / static_cast<double>(count);  // count 0: nan, as the loss
  const double uniform = eps / static_cast<double>(classes);
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, result.scalar_type(), "cross_entropy_backward", [&] {
    scalar_t* row = result.data_ptr<scalar_t>();
    for (std::int64_t r = 0; r < rows; ++r, row += classes) {
      if (t[r] == ignore) {
        std::fill(row, row + classes, scalar_t(0));
        continue;
      }
      TORCH_CHECK(t[r] >= 0 && t[r] < classes, "cross_entropy_backward: target ", t[r], " is not a class in [0, ",
                  classes, ") (nor the ignore_index ", ignore, ")");
      for (std::int64_t c = 0; c < classes; ++c) {
        const double wanted = (c == t[r] ? 1.0 - eps : 0.0) + uniform;  // the smoothed target distribution
        row[c] = static_cast<scalar_t>((static_cast<double>(row[c]) - wanted) * factor);
      }
    }
  });
  return result;
}

template <bool Host>
Results crossEntropyBackwardKernel(const KernelArgs& a) {
  const at::Tensor& grad = a.operands[0];
  const at::Tensor& logits = a.operands[1];
  const std::int64_t classes = logits.size(-1);
  at::Tensor target = a.operands[2].reshape({-1, 1});
  if (target.scalar_type() != at::kLong) target = target.to(at::kLong);
  const std::int64_t rows = target.size(0);
  at::Tensor out = resultBuffer(a);
  at::Tensor result = out.view({rows, classes});
  softmaxRows<Host>(result, logits.reshape({-1, classes}));
  const std::optional<std::int64_t> ignore = ir::getInt(a.node.attrs(), "ignore_index");
  const double eps = ir::getFloat(a.node.attrs(), "label_smoothing").value_or(0.0);
  if (ignore || eps > 0) {
    crossEntropyBackwardRows<Host>(result, grad, target.contiguous(), ignore.value_or(std::numeric_limits<std::int64_t>::min()),
                             eps);
    return {out};
  }
  {  // the -1 column is freed before grad / rows is made (the op table's workspace: the larger)
    const at::Tensor minusOne = at::full({rows, 1}, -1.0, result.options());
    if (Host && reducedPrecision(result) && result.is_contiguous()) {
      // scatter_add_ by hand: ATen 2.x's converts the whole bf16/f16 result to a float copy.
      const std::int64_t* t = target.data_ptr<std::int64_t>();
      const std::int64_t step = target.stride(0);
      withReducedType(result.scalar_type(), [&](auto zero) {
        using scalar_t = decltype(zero);
        scalar_t* row = result.data_ptr<scalar_t>();
        const scalar_t* add = minusOne.data_ptr<scalar_t>();
        for (std::int64_t r = 0; r < rows; ++r, row += classes) {
          const std::int64_t c = t[r * step];
          TORCH_CHECK(c >= 0 && c < classes, "cross_entropy_backward: target ", c, " is not a class in [0, ", classes, ")");
          row[c] = static_cast<scalar_t>(float(row[c]) + float(add[r]));
        }
      });
    } else {
      result.scatter_add_(1, target, minusOne);
    }
  }
  result.mul_(grad.div(static_cast<double>(rows)));
  return {out};
}

Results mseBackwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  return {at::mse_loss_backward_out(out, a.operands[0], a.operands[1], a.operands[2], at::Reduction::Mean)};
}

// (grad_out[N.., out], x[N.., in]) -> grad_out^T x summed over the leading dims: [out, in].
// The host's: bf16 and f16 with their planned temporaries (runtime/kernels/low_precision_products.h);
// f32 with few rows N on the tile kernels (runtime/kernels/host_products.h).
template <bool Host>
Results linearWeightGradKernel(const KernelArgs& a) {
  const at::Tensor& g = a.operands[0];
  const at::Tensor& x = a.operands[1];
  at::Tensor out = resultBuffer(a);
  const at::Tensor gt = g.reshape({-1, g.size(-1)}).t(), x2d = x.reshape({-1, x.size(-1)});
  if (Host && (lowPrecisionProduct2d(a.node, gt, x2d, nullptr, out) || hostProduct(out, gt, x2d))) return {out};
  return {at::mm_out(out, gt, x2d)};
}

Results fullKernel(const KernelArgs& a) {
  return {resultBuffer(a).fill_(floatAttr(a.node, "value"))};
}

const KernelEntry kBackward[] = {
    {"sum_to", sumToKernel},
    {"relu_backward", reluBackwardKernel},
    {"gelu_backward", geluBackwardKernel},
    {"tanh_backward", tanhBackwardKernel},
    {"sigmoid_backward", sigmoidBackwardKernel},
    {"softmax_backward", softmaxBackwardKernel},
    {"log_softmax_backward", logSoftmaxBackwardKernel},
    {"layer_norm_backward", layerNormBackwardKernel<false>},
    {"causal_mask_backward", causalMaskBackwardKernel},
    {"slice_backward", sliceBackwardKernel},
    {"select_backward", selectBackwardKernel},
    {"concat", concatKernel},
    {"embedding_backward", embeddingBackwardKernel<false>},
    {"cross_entropy_backward", crossEntropyBackwardKernel<false>},
    {"mse_backward", mseBackwardKernel},
    {"linear_weight_grad", linearWeightGradKernel<false>},
    {"full", fullKernel},
};

// The host's own: bf16/f16 loops where ATen 2.x would convert a whole operand to float, the
// loss backward's rows through raw pointers, bf16 and f16 products with planned temporaries.
const KernelEntry kHostBackward[] = {
    {"embedding_backward", embeddingBackwardKernel<true>},
    {"cross_entropy_backward", crossEntropyBackwardKernel<true>},
    {"linear_weight_grad", linearWeightGradKernel<true>},
};

}  // namespace

const KernelEntry kF32Statistics[] = {{"layer_norm_backward", layerNormBackwardKernel<true>}};

std::span<const KernelEntry> backwardKernels() { return kBackward; }
std::span<const KernelEntry> layerNormBackwardF32StatisticsKernels() { return kF32Statistics; }
std::span<const KernelEntry> hostBackwardKernels() { return kHostBackward; }

}  // namespace gradc::runtime
