// A conv2d node's problem as oneDNN describes it (onednn/conv.h), from the shapes of its input,
// weights and output and its window attributes: one definition for the op table's workspace
// rules (ir/ops_conv.cpp) and the runtime's kernels (runtime/onednn_conv.cpp), so both ask
// oneDNN the same question.
#pragma once

#include <optional>

#include "ir/attribute.h"
#include "ir/tensor_type.h"
#include "ir/window_geometry.h"
#include "onednn/conv.h"

namespace gradc::ir {

// x [N, C, H, W], w [O, C / groups, kh, kw], y [N, O, OH, OW]; nullopt when the attributes do
// not read (the verifier reports those).
inline std::optional<onednn::ConvShape> oneDnnConvShape(const AttrMap& attrs, const Shape& x, const Shape& w,
                                                        const Shape& y, bool bias) {
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

}  // namespace gradc::ir
