// Backward kernels (created by the autodiff pass): mostly one-to-one with the ATen backward
// kernels that LibTorch autograd runs, so gradients match autograd closely.
//
// Shape legend: N rows = product of leading dims, C classes, D features, in/out linear sizes.
#include <ATen/core/Reduction.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_log_softmax_backward_data.h>
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

#include "runtime/kernels.h"

namespace gradc::runtime {
namespace {
using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// Memory behaviour, as in kernels_forward.cpp: results are fresh contiguous tensors that share
// no storage with the operands; elementwise kernels with a strided operand write into a fresh
// contiguous result (anyStrided/freshResult; the `_out` variants compute the same bits).

// x -> sum over the axes broadcasting expanded, down to `shape`. A sum_to that reduces nothing
// (never emitted by autodiff) copies: at::sum_to_size would return x itself.
Results sumToKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  std::vector<std::int64_t> shape = intListAttr(a.node, "shape");
  if (x.sizes() == c10::IntArrayRef(shape)) return {x.clone(at::MemoryFormat::Contiguous)};
  return {x.sum_to_size(shape)};
}

// (grad, y): grad where y > 0, else 0 -- autograd's relu backward, on the saved output.
Results reluBackwardKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::threshold_backward(a.operands[0], a.operands[1], 0)};
  at::Tensor out = freshResult(a);
  return {at::threshold_backward_out(out, a.operands[0], a.operands[1], 0)};
}

// (grad, x): grad * gelu'(x), for the same approximation as the forward.
Results geluBackwardKernel(const KernelArgs& a) {
  std::string approximate = ir::getString(a.node.attrs(), "approximate").value_or("none");
  if (!anyStrided(a)) return {at::gelu_backward(a.operands[0], a.operands[1], approximate)};
  at::Tensor out = freshResult(a);
  return {at::gelu_backward_out(out, a.operands[0], a.operands[1], approximate)};
}

Results tanhBackwardKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::tanh_backward(a.operands[0], a.operands[1])};
  at::Tensor out = freshResult(a);
  return {at::tanh_backward_out(out, a.operands[0], a.operands[1])};
}

Results sigmoidBackwardKernel(const KernelArgs& a) {
  if (!anyStrided(a)) return {at::sigmoid_backward(a.operands[0], a.operands[1])};
  at::Tensor out = freshResult(a);
  return {at::sigmoid_backward_out(out, a.operands[0], a.operands[1])};
}

// (grad, y = softmax(x)): y * (grad - sum(grad * y, dim)).
Results softmaxBackwardKernel(const KernelArgs& a) {
  const at::Tensor& y = a.operands[1];
  return {at::_softmax_backward_data(a.operands[0], y, axisAttr(a.node, "dim", y.dim()), y.scalar_type())};
}

// (grad, y = log_softmax(x)): grad - exp(y) * sum(grad, dim).
Results logSoftmaxBackwardKernel(const KernelArgs& a) {
  const at::Tensor& y = a.operands[1];
  return {at::_log_softmax_backward_data(a.operands[0], y, axisAttr(a.node, "dim", y.dim()), y.scalar_type())};
}

// (grad[N.., D], x[N.., D], mean[N.., 1], rstd[N.., 1], weight[D], bias[D])
//   -> grad_x[N.., D], grad_weight[D], grad_bias[D].
// ATen reads the statistics as N contiguous values, which [N.., 1] tensors already are.
Results layerNormBackwardKernel(const KernelArgs& a) {
  const at::Tensor& x = a.operands[1];
  auto [gx, gw, gb] = at::native_layer_norm_backward(a.operands[0], x, {x.size(-1)}, a.operands[2].contiguous(),
                                                     a.operands[3].contiguous(), a.operands[4], a.operands[5],
                                                     {true, true, true});
  return {std::move(gx), std::move(gw), std::move(gb)};
}

// One bool [s, t] temporary (the mask), and the result.
Results causalMaskBackwardKernel(const KernelArgs& a) {
  const at::Tensor& g = a.operands[0];
  at::Tensor above = at::ones({g.size(-2), g.size(-1)}, g.options().dtype(at::kBool)).triu_(1);
  at::Tensor y = g.clone(at::MemoryFormat::Contiguous);
  y.masked_fill_(above, 0);
  return {y};
}

Results sliceBackwardKernel(const KernelArgs& a) {
  std::vector<std::int64_t> shape = intListAttr(a.node, "input_shape");
  const auto rank = static_cast<std::int64_t>(shape.size());
  return {at::slice_backward(a.operands[0], shape, axisAttr(a.node, "dim", rank), intAttr(a.node, "start"),
                             intAttr(a.node, "end"), 1)};
}

Results selectBackwardKernel(const KernelArgs& a) {
  std::vector<std::int64_t> shape = intListAttr(a.node, "input_shape");
  const auto rank = static_cast<std::int64_t>(shape.size());
  return {at::select_backward(a.operands[0], shape, axisAttr(a.node, "dim", rank), intAttr(a.node, "index"))};
}

Results concatKernel(const KernelArgs& a) {
  const std::int64_t dim = axisAttr(a.node, "dim", a.operands[0].dim());
  return {at::cat(at::TensorList(a.operands.data(), a.operands.size()), dim)};
}

// (grad[..., D], indices[...]) -> [num, D]: rows of grad summed per index (repeats add up).
Results embeddingBackwardKernel(const KernelArgs& a) {
  return {at::embedding_dense_backward(a.operands[0], a.operands[1], intAttr(a.node, "num"), /*padding_idx=*/-1,
                                       /*scale_grad_by_freq=*/false)};
}

// (grad[], logits[N.., C], target[N..]) -> grad * (softmax(logits) - onehot(target)) / N.
// Computed in place in the result: softmax, subtract 1 at the targets, scale. No [N, C]
// temporary beyond the result (the op table's declared workspace is an upper bound). Autograd
// computes the same quantity as log_softmax_backward(nll_loss_backward(...)); the two differ by
// rounding only (exp(log_softmax) vs softmax), well under 1e-6 relative.
Results crossEntropyBackwardKernel(const KernelArgs& a) {
  const at::Tensor& grad = a.operands[0];
  const at::Tensor& logits = a.operands[1];
  const std::int64_t classes = logits.size(-1);
  at::Tensor target = a.operands[2].reshape({-1, 1});
  if (target.scalar_type() != at::kLong) target = target.to(at::kLong);
  const std::int64_t rows = target.size(0);
  at::Tensor result = at::_softmax(logits.reshape({-1, classes}), 1, /*half_to_float=*/false);
  result.scatter_add_(1, target, at::full({rows, 1}, -1.0, result.options()));
  result.mul_(grad.div(static_cast<double>(rows)));
  return {result.view(logits.sizes())};
}

Results mseBackwardKernel(const KernelArgs& a) {
  return {at::mse_loss_backward(a.operands[0], a.operands[1], a.operands[2], at::Reduction::Mean)};
}

// (grad_out[N.., out], x[N.., in]) -> grad_out^T x summed over the leading dims: [out, in].
Results linearWeightGradKernel(const KernelArgs& a) {
  const at::Tensor& g = a.operands[0];
  const at::Tensor& x = a.operands[1];
  return {at::mm(g.reshape({-1, g.size(-1)}).t(), x.reshape({-1, x.size(-1)}))};
}

Results fullKernel(const KernelArgs& a) {
  return {at::full(intListAttr(a.node, "shape"), floatAttr(a.node, "value"),
                   optionsFor(*ir::getDType(a.node.attrs(), "dtype")))};
}

const KernelEntry kBackward[] = {
    {"sum_to", sumToKernel},
    {"relu_backward", reluBackwardKernel},
    {"gelu_backward", geluBackwardKernel},
    {"tanh_backward", tanhBackwardKernel},
    {"sigmoid_backward", sigmoidBackwardKernel},
    {"softmax_backward", softmaxBackwardKernel},
    {"log_softmax_backward", logSoftmaxBackwardKernel},
    {"layer_norm_backward", layerNormBackwardKernel},
    {"causal_mask_backward", causalMaskBackwardKernel},
    {"slice_backward", sliceBackwardKernel},
    {"select_backward", selectBackwardKernel},
    {"concat", concatKernel},
    {"embedding_backward", embeddingBackwardKernel},
    {"cross_entropy_backward", crossEntropyBackwardKernel},
    {"mse_backward", mseBackwardKernel},
    {"linear_weight_grad", linearWeightGradKernel},
    {"full", fullKernel},
};

}  // namespace

std::span<const KernelEntry> backwardKernels() { return kBackward; }

}  // namespace gradc::runtime
