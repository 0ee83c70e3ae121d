#include "runtime/kernels/kernels_conv_device.h"

#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/var_mean.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward.h>

#include <array>
#include <cassert>

#include "ir/window_geometry.h"

namespace gradc::runtime::conv_device {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

struct Window {
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups;
};

Window windowOf(const ir::Node& node, at::IntArrayRef weight) {
  ir::WindowGeometry g;
  [[maybe_unused]] std::optional<std::string> error =
      ir::readWindow(node.attrs(), g, std::array<std::int64_t, 2>{weight[2], weight[3]});
  assert(!error && "the verifier checked the window attributes");
  return {{g.stride[0], g.stride[1]}, {g.padding[0], g.padding[1]}, {g.dilation[0], g.dilation[1]},
          intAttr(node, "groups")};
}

// The reduction dimensions of a [N, C, ...] batch: all but the channel.
std::vector<std::int64_t> batchDims(const at::Tensor& x) {
  std::vector<std::int64_t> dims{0};
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel [C] vector shaped to broadcast against [N, C, ...].
at::Tensor perChannel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<std::int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = v.numel();
  return v.reshape(shape);
}

}  // namespace

Results conv2d(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  const at::Tensor& w = a.operands[1];
  const Window win = windowOf(a.node, w.sizes());
  const c10::optional<at::Tensor> bias = a.operands.size() == 3 ? c10::optional<at::Tensor>(a.operands[2]) : c10::nullopt;
  at::Tensor y = resultBuffer(a);
  y.copy_(at::convolution(x, w, bias, win.stride, win.padding, win.dilation, false, {0, 0}, win.groups));
  return {y};
}

// One gradient of a convolution with ATen's backward, into `out`: the input's (`weightGrad`
// false) or the weight's. The operand whose gradient is computed is needed only for its shape,
// so the result buffer, which has that shape, stands in for it.
Results convolutionGradient(const KernelArgs& a, bool weightGrad) {
  const at::Tensor& gy = a.operands[0];
  at::Tensor out = resultBuffer(a);
  const at::Tensor& x = weightGrad ? a.operands[1] : out;
  const at::Tensor& w = weightGrad ? out : a.operands[1];
  const Window win = windowOf(a.node, w.sizes());
  auto grads = at::convolution_backward(gy, x, w, c10::nullopt, win.stride, win.padding, win.dilation, false, {0, 0},
                                        win.groups, {!weightGrad, weightGrad, false});
  out.copy_(weightGrad ? std::get<1>(grads) : std::get<0>(grads));
  return {out};
}

Results conv2dInputGrad(const KernelArgs& a) { return convolutionGradient(a, /*weightGrad=*/false); }
Results conv2dWeightGrad(const KernelArgs& a) { return convolutionGradient(a, /*weightGrad=*/true); }

// Results: y, mean, invstd, and the unbiased variance (for the running statistics).
Results batchNorm(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  at::Tensor y = resultBuffer(a, 0), mean = resultBuffer(a, 1), invstd = resultBuffer(a, 2), var = resultBuffer(a, 3);
  const double eps = floatAttr(a.node, "eps");
  const std::int64_t count = x.numel() / x.size(1);
  auto [biased, m] = at::var_mean(x, batchDims(x), /*unbiased=*/false);
  mean.copy_(m);
  invstd.copy_(biased.add(eps).rsqrt());
  var.copy_(biased.mul(static_cast<double>(count) / static_cast<double>(count - 1)));
  const at::Tensor alpha = invstd.mul(a.operands[1]);
  y.copy_(x.mul(perChannel(alpha, x)).add_(perChannel(a.operands[2].sub(mean.mul(alpha)), x)));
  return {y, mean, invstd, var};
}

// gx = (g - mean(g) - xhat * mean(g * xhat)) * invstd * w, xhat = (x - mean) * invstd;
// gw = sum(g * xhat), gb = sum(g).
Results batchNormBackward(const KernelArgs& a) {
  const at::Tensor& gy = a.operands[0];
  const at::Tensor& x = a.operands[1];
  const at::Tensor &mean = a.operands[2], &invstd = a.operands[3], &w = a.operands[4];
  at::Tensor gx = resultBuffer(a, 0), gw = resultBuffer(a, 1), gb = resultBuffer(a, 2);
  const std::vector<std::int64_t> dims = batchDims(x);
  const double count = static_cast<double>(x.numel() / x.size(1));
  const at::Tensor xhat = x.sub(perChannel(mean, x)).mul_(perChannel(invstd, x));
  gb.copy_(gy.sum(dims));
  gw.copy_(gy.mul(xhat).sum(dims));
  const at::Tensor gradMean = perChannel(gb.div(count), x), projection = perChannel(gw.div(count), x);
  gx.copy_(gy.sub(gradMean).sub_(xhat.mul(projection)).mul_(perChannel(invstd.mul(w), x)));
  return {gx, gw, gb};
}

// running = (1 - momentum) * running + momentum * batch, in place; num_batches_tracked + 1.
Results runningStatsUpdate(const KernelArgs& a) {
  at::Tensor rm = a.operands[0], rv = a.operands[1], tracked = a.operands[2];
  if (ir::getBool(a.node.attrs(), "cumulative").value_or(false)) {
    // 1 / (tracked + 1) on the device, without reading the count back.
    const at::Tensor m = tracked.add(1).to(rm.scalar_type()).reciprocal_();
    rm.add_(a.operands[3].sub(rm).mul_(m));
    rv.add_(a.operands[4].sub(rv).mul_(m));
  } else {
    const double m = floatAttr(a.node, "momentum");
    rm.mul_(1 - m).add_(a.operands[3], m);
    rv.mul_(1 - m).add_(a.operands[4], m);
  }
  tracked.add_(1);
  return {};
}

// y = (x - running_mean) / sqrt(running_var + eps) * w + b.
Results batchNormInference(const KernelArgs& a) {
  const at::Tensor& x = a.operands[0];
  at::Tensor y = resultBuffer(a);
  const double eps = floatAttr(a.node, "eps");
  const at::Tensor alpha = a.operands[1].div(a.operands[4].add(eps).sqrt());
  const at::Tensor beta = a.operands[2].sub(a.operands[3].mul(alpha));
  y.copy_(x.mul(perChannel(alpha, x)).add_(perChannel(beta, x)));
  return {y};
}

std::vector<at::Tensor> adaptiveAvgPool2d(const KernelArgs& a) {
  at::Tensor y = kernel_detail::resultBuffer(a);
  at::adaptive_avg_pool2d_out(y, a.operands[0].contiguous(), {y.size(2), y.size(3)});
  return {y};
}

std::vector<at::Tensor> adaptiveAvgPool2dBackward(const KernelArgs& a) {
  at::Tensor gx = kernel_detail::resultBuffer(a);
  gx.copy_(at::_adaptive_avg_pool2d_backward(a.operands[0].contiguous(), gx));
  return {gx};
}

}  // namespace gradc::runtime::conv_device

namespace gradc::runtime {
namespace {
const KernelEntry kConvDevice[] = {
    {"conv2d", conv_device::conv2d},
    {"conv2d_input_grad", conv_device::conv2dInputGrad},
    {"conv2d_weight_grad", conv_device::conv2dWeightGrad},
    {"adaptive_avg_pool2d", conv_device::adaptiveAvgPool2d},
    {"adaptive_avg_pool2d_backward", conv_device::adaptiveAvgPool2dBackward},
    {"batch_norm", conv_device::batchNorm},
    {"batch_norm_backward", conv_device::batchNormBackward},
    {"running_stats_update", conv_device::runningStatsUpdate},
    {"batch_norm_inference", conv_device::batchNormInference},
};
}  // namespace

std::span<const KernelEntry> convDeviceKernels() { return kConvDevice; }

}  // namespace gradc::runtime
