// The geometry of a sliding window over the two spatial axes of an NCHW tensor: convolution
// and pooling read it from a node's attributes (kernel/weight extents, stride, padding,
// dilation, ceil_mode), the op table infers shapes and costs from it, and the runtime's kernels
// loop over it. std only, so ir/, frontend/ and runtime/ share one definition.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"

namespace gradc::ir {

struct WindowGeometry {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> padding{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  bool ceilMode = false;

  // Output extent along spatial axis `a` (0: height, 1: width) for an input extent `in`, as
  // PyTorch's conv2d and pooling compute it; 0 or less when the window does not fit.
  std::int64_t outExtent(int a, std::int64_t in) const {
    const std::int64_t span = dilation[a] * (kernel[a] - 1) + 1;
    const std::int64_t room = in + 2 * padding[a] - span;
    if (room < 0) return 0;
    std::int64_t out = (ceilMode ? (room + stride[a] - 1) / stride[a] : room / stride[a]) + 1;
    // ceil_mode: the last window must start inside the input or its left padding (PyTorch's rule).
    if (ceilMode && (out - 1) * stride[a] >= in + padding[a]) --out;
    return out;
  }

  // A 1x1 window with stride 1 and no padding reads each pixel once: the input is its own
  // im2col matrix, so convolution needs no column buffer.
  bool pointwise() const {
    return kernel == std::array<std::int64_t, 2>{1, 1} && stride == std::array<std::int64_t, 2>{1, 1} &&
           padding == std::array<std::int64_t, 2>{0, 0};
  }
};

// Samples a convolution kernel (runtime/kernels/kernels_conv.cpp) puts in one GEMM: one when a sample
// has at least kConvGemmColumns output pixels, else enough samples to reach that many columns,
// at most the batch. Small images (ResNets' deep stages: 4x4, 8x8) would otherwise run GEMMs
// too narrow for the BLAS to reach its speed. The op table sizes the workspace with it.
inline constexpr std::int64_t kConvGemmColumns = 4096;
inline std::int64_t convChunkSamples(std::int64_t batch, std::int64_t outPixels) {
  if (outPixels >= kConvGemmColumns || batch <= 1) return 1;
  const std::int64_t n = (kConvGemmColumns + outPixels - 1) / outPixels;
  return n < batch ? n : batch;
}

// Reads stride, padding and dilation (each a 2-element IntList; dilation optional, default
// 1) and ceil_mode (optional Bool) from `attrs`; the kernel extents come from the caller (the
// weight's shape for convolutions) or from the attribute "kernel" when `kernel` is nullopt.
// An error message when a list has the wrong length or a value is out of range.
inline std::optional<std::string> readWindow(const AttrMap& attrs, WindowGeometry& g,
                                             std::optional<std::array<std::int64_t, 2>> kernel = std::nullopt) {
  auto pair = [&](const char* key, std::array<std::int64_t, 2>& out, std::int64_t least) -> std::optional<std::string> {
    std::optional<std::vector<std::int64_t>> v = getIntList(attrs, key);
    if (!v) return std::nullopt;  // optional attribute left at its default
    if (v->size() != 2) return std::string(key) + " must list 2 values (height, width), got " + std::to_string(v->size());
    for (std::int64_t e : *v)
      if (e < least)
        return std::string(key) + " values must be >= " + std::to_string(least) + ", got " + std::to_string(e);
    out = {(*v)[0], (*v)[1]};
    return std::nullopt;
  };
  if (kernel) g.kernel = *kernel;
  else if (auto e = pair("kernel", g.kernel, 1)) return e;
  if (auto e = pair("stride", g.stride, 1)) return e;
  if (auto e = pair("padding", g.padding, 0)) return e;
  if (auto e = pair("dilation", g.dilation, 1)) return e;
  g.ceilMode = getBool(attrs, "ceil_mode").value_or(false);
  return std::nullopt;
}

}  // namespace gradc::ir
