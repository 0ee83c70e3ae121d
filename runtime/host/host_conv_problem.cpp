// The host's convolution problems and workspace rules (see host_conv_problem.h).
#include "runtime/host/host_conv_problem.h"

#include <algorithm>
#include <array>
#include <vector>

#include "ir/conv_problem.h"
#include "ir/op_rules.h"
#include "ir/window_geometry.h"
#include "onednn/gemm.h"
#include "runtime/host/host_workspace.h"

namespace gradc::runtime::host {

std::optional<onednn::ConvShape> oneDnnConvShape(const ir::AttrMap& attrs, const ir::Shape& x, const ir::Shape& w,
                                                 const ir::Shape& y, bool bias) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return std::nullopt;
  ir::WindowGeometry g;
  if (ir::readWindow(attrs, g, std::array<std::int64_t, 2>{w[2], w[3]})) return std::nullopt;
  onednn::ConvShape s;
  s.n = x[0];
  s.c = x[1];
  s.h = x[2];
  s.w = x[3];
  s.o = w[0];
  s.kh = w[2];
  s.kw = w[3];
  s.oh = y[2];
  s.ow = y[3];
  s.stride = g.stride;
  s.padding = g.padding;
  s.dilation = g.dilation;
  s.groups = ir::getInt(attrs, "groups").value_or(1);
  s.bias = bias;
  return s;
}

std::int64_t im2colProductScratch(onednn::ConvPass pass, ir::DType dtype, std::int64_t samples,
                                  std::int64_t outChannels, std::int64_t columns, std::int64_t pixels, int threads) {
  if ((dtype != ir::DType::bf16 && dtype != ir::DType::f16) || samples <= 0) return 0;
  const std::int64_t chunk = ir::convChunkSamples(samples, pixels);
  std::int64_t most = 0;
  for (std::int64_t m : {chunk, samples - (samples - 1) / chunk * chunk}) {
    const std::int64_t width = m * pixels;  // the GEMM's pixel side: m samples' output pixels
    std::vector<onednn::ProductShape> products;
    switch (pass) {
      case onednn::ConvPass::Forward:  // y = w [O/g, columns] @ cols [columns, width]
        products.push_back({.m = outChannels, .k = columns, .n = width});
        break;
      case onednn::ConvPass::InputGrad:  // cols = w^T [columns, O/g] @ grad [O/g, width]
        products.push_back({.m = columns, .k = outChannels, .n = width});
        break;
      case onednn::ConvPass::WeightGrad:  // gw (+)= grad [O/g, width] @ cols^T [width, columns]
        products.push_back({.m = outChannels, .k = width, .n = columns});
        products.push_back({.m = outChannels, .k = width, .n = columns, .accumulate = true});
        break;
    }
    for (const onednn::ProductShape& p : products) most = std::max(most, productWorkspace(p, dtype, threads));
  }
  return most;
}

std::optional<OneDnnConvPass> oneDnnConvPass(const ir::AttrMap& attrs, onednn::ConvPass pass, const ir::TensorType& x,
                                             const ir::TensorType& w, const ir::TensorType& y, bool bias, int threads) {
  if (x.dtype != ir::DType::f32) return std::nullopt;
  std::optional<onednn::ConvShape> s = oneDnnConvShape(attrs, x.shape, w.shape, y.shape, bias);
  if (!s) return std::nullopt;
  std::optional<onednn::ConvChunking> c = onednn::convChunking(*s, pass, threads, ir::im2colWorkspaceBytes(attrs, w, y));
  if (!c) return std::nullopt;
  return OneDnnConvPass{*s, *c};
}

namespace {

std::int64_t convWorkspace(const ir::OpContext& c, onednn::ConvPass pass, const ir::TensorType& x,
                           const ir::TensorType& w, const ir::TensorType& y, bool bias) {
  if (std::optional<OneDnnConvPass> d = oneDnnConvPass(c.attrs, pass, x, w, y, bias, c.kernelThreads))
    return d->chunking.workspaceBytes;
  const std::int64_t groups = ir::getInt(c.attrs, "groups").value_or(1);
  const std::int64_t products =
      im2colProductScratch(pass, y.dtype, y.shape[0], w.shape[0] / std::max<std::int64_t>(groups, 1),
                           w.shape[1] * w.shape[2] * w.shape[3], y.shape[2] * y.shape[3], c.kernelThreads);
  return ir::rules::saturatingAdd(ir::im2colWorkspaceBytes(c.attrs, w, y), products);
}

}  // namespace

std::int64_t workspaceConv2d(const ir::OpContext& c, std::span<const ir::TensorType> r) {
  return convWorkspace(c, onednn::ConvPass::Forward, c.inputs[0], c.inputs[1], r[0], c.inputs.size() == 3);
}
std::int64_t workspaceConv2dInputGrad(const ir::OpContext& c, std::span<const ir::TensorType> r) {
  return convWorkspace(c, onednn::ConvPass::InputGrad, r[0], c.inputs[1], c.inputs[0], false);
}
std::int64_t workspaceConv2dWeightGrad(const ir::OpContext& c, std::span<const ir::TensorType> r) {
  return convWorkspace(c, onednn::ConvPass::WeightGrad, c.inputs[1], r[0], c.inputs[0], false);
}

}  // namespace gradc::runtime::host
