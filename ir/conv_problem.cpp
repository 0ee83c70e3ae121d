// conv2d's kernel choice and workspaces (see conv_problem.h).
#include "ir/conv_problem.h"

#include <algorithm>
#include <vector>

#include "onednn/gemm.h"

#include "ir/op_rules.h"
#include "ir/window_geometry.h"

namespace gradc::ir {

std::optional<onednn::ConvShape> oneDnnConvShape(const AttrMap& attrs, const Shape& x, const Shape& w, const Shape& y,
                                                 bool bias) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4) return std::nullopt;
  WindowGeometry g;
  if (readWindow(attrs, g, std::array<std::int64_t, 2>{w[2], w[3]})) return std::nullopt;
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
  s.groups = getInt(attrs, "groups").value_or(1);
  s.bias = bias;
  return s;
}

// One sample's im2col matrix [C/g * kh * kw, OH * OW] (none for pointwise windows); when the
// kernel puts several samples in one GEMM (convChunkSamples), the chunk's column matrix and its
// [O/g, samples * OH * OW] GEMM result or gathered gradient.
std::int64_t im2colWorkspaceBytes(const AttrMap& attrs, const TensorType& w, const TensorType& y) {
  using rules::saturatingMul;
  WindowGeometry g;
  if (readWindow(attrs, g, std::array<std::int64_t, 2>{w.shape[2], w.shape[3]})) return 0;
  const std::int64_t pixels = y.shape[2] * y.shape[3], rows = w.shape[1] * w.shape[2] * w.shape[3];
  const std::int64_t chunk = convChunkSamples(y.shape[0], pixels);
  const std::int64_t groups = getInt(attrs, "groups").value_or(1);
  if (chunk > 1) return saturatingMul(saturatingMul(rows + w.shape[0] / groups, chunk * pixels), dtypeSize(y.dtype));
  if (g.pointwise()) return 0;
  return saturatingMul(saturatingMul(rows, pixels), dtypeSize(y.dtype));
}

std::int64_t im2colProductScratch(onednn::ConvPass pass, DType dtype, std::int64_t samples, std::int64_t outChannels,
                                  std::int64_t columns, std::int64_t pixels, int threads) {
  if ((dtype != DType::bf16 && dtype != DType::f16) || samples <= 0) return 0;
  const std::int64_t chunk = convChunkSamples(samples, pixels);
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
    for (const onednn::ProductShape& p : products) most = std::max(most, rules::productWorkspace(p, dtype, threads));
  }
  return most;
}

std::optional<OneDnnConvPass> oneDnnConvPass(const AttrMap& attrs, onednn::ConvPass pass, const TensorType& x,
                                             const TensorType& w, const TensorType& y, bool bias, int threads) {
  if (x.dtype != DType::f32) return std::nullopt;
  std::optional<onednn::ConvShape> s = oneDnnConvShape(attrs, x.shape, w.shape, y.shape, bias);
  if (!s) return std::nullopt;
  std::optional<onednn::ConvChunking> c = onednn::convChunking(*s, pass, threads, im2colWorkspaceBytes(attrs, w, y));
  if (!c) return std::nullopt;
  return OneDnnConvPass{*s, *c};
}

}  // namespace gradc::ir
