// Kernels of the convolution and pooling ops (ir/ops_conv.cpp); batch normalisation's are in
// kernels_batch_norm.cpp.
//
// Convolution in f32 runs on oneDNN's blocked kernels where it has one (runtime/kernels/onednn_conv.h);
// otherwise (f64, no oneDNN) it is one GEMM per sample and group against the sample's im2col matrix
// [C/g * kh * kw, OH * OW] (ATen's im2col/col2im), written straight into the planned result;
// the column matrix is the only memory a convolution kernel allocates (the op table's
// workspace), and pointwise windows (1x1, stride 1, no padding) need none: the image is its own
// column matrix. Outputs of fewer than kConvGemmColumns pixels put several samples in one GEMM
// (ir/window_geometry.h): their column matrix and the GEMM's other side, gathered into or
// scattered from the result's layout, are then the workspace. The weight gradient accumulates over the samples in place (addmm_), so it
// needs no per-sample temporary either. In bf16 and f16 the im2col and col2im are this file's
// own loops (ATen has none on the CPU) and the GEMMs are gradc's low-precision products
// (runtime/kernels/low_precision_products.h), whose temporaries the workspace also holds, one
// product's at a time. Pooling calls ATen's `_out` kernels. Off the host (a GPU), the
// loops give way to ATen's device kernels (runtime/kernels/kernels_conv_device.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool2d_backward.h>
#include <ATen/ops/col2im.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/im2col.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool2d_with_indices_backward.h>
#include <ATen/ops/mm.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "ir/conv_problem.h"
#include "ir/window_geometry.h"
#include "runtime/core/dtype_map.h"
#include "runtime/host/host_conv_problem.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/kernels_conv_device.h"
#include "runtime/kernels/low_precision_products.h"
#include "runtime/kernels/onednn_conv.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

ir::WindowGeometry geometry(const ir::Node& node, std::optional<std::array<std::int64_t, 2>> kernel = std::nullopt) {
  ir::WindowGeometry g;
  [[maybe_unused]] std::optional<std::string> error = ir::readWindow(node.attrs(), g, kernel);
  assert(!error && "the verifier checked the window attributes");
  return g;
}

std::vector<std::int64_t> list(const std::array<std::int64_t, 2>& a) { return {a[0], a[1]}; }

// The loop nest the three convolution kernels share: for each sample n and group g, the
// sample's channels of the group as a [C/g, H, W] view and its im2col matrix.
struct ConvLoop {
  ir::WindowGeometry g;
  std::int64_t N, C, H, W, O, OH, OW, groups;
  std::int64_t cg() const { return C / groups; }
  std::int64_t og() const { return O / groups; }
  std::int64_t columns() const { return cg() * g.kernel[0] * g.kernel[1]; }
  std::int64_t outPixels() const { return OH * OW; }

  // x[n]'s channels of group `grp` ([C/g, H, W]) as a column matrix [C/g*kh*kw, OH*OW]: the
  // image itself for pointwise windows, else im2col into `cols`.
  at::Tensor columnsOf(const at::Tensor& x, std::int64_t n, std::int64_t grp, at::Tensor& cols) const {
    at::Tensor plane = x.select(0, n).narrow(0, grp * cg(), cg());
    if (g.pointwise()) return plane.reshape({cg(), H * W});
    return at::im2col_out(cols, plane, list(g.kernel), list(g.dilation), list(g.padding), list(g.stride));
  }
};

ConvLoop convLoop(const ir::Node& node, at::IntArrayRef x, at::IntArrayRef w, at::IntArrayRef y) {
  ConvLoop l{geometry(node, std::array<std::int64_t, 2>{w[2], w[3]}), x[0], x[1], x[2], x[3], w[0], y[2], y[3],
             kernel_detail::intAttr(node, "groups")};
  return l;
}

at::Tensor columnBuffer(const KernelArgs& a, const ConvLoop& l, ir::DType dtype) {
  return l.g.pointwise() ? at::Tensor() : at::empty({l.columns(), l.outPixels()}, optionsFor(a, dtype));
}

// ---- several samples per GEMM (small outputs: ir/window_geometry.h, convChunkSamples) ---------
//
// The chunk's column matrix is [C/g*kh*kw, m*OH*OW] with sample i's pixels in columns
// [i*OH*OW, (i+1)*OH*OW); the GEMM's other side is the chunk's [O/g, m*OH*OW] result or
// gathered gradient. im2col and col2im are written here because they read and write one
// sample's block of those wider rows.

// cols[row][col0 + p] = x[c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw] (0 outside the image), row =
// (c*kh + ki)*kw + kj, p = oh*OW + ow; `plane` is one sample's [C/g, H, W].
template <class T>
void im2colBlock(const T* plane, const ConvLoop& l, T* cols, std::int64_t ld, std::int64_t col0) {
  const auto& g = l.g;
  for (std::int64_t c = 0; c < l.cg(); ++c)
    for (std::int64_t ki = 0; ki < g.kernel[0]; ++ki)
      for (std::int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        T* dst = cols + ((c * g.kernel[0] + ki) * g.kernel[1] + kj) * ld + col0;
        for (std::int64_t oh = 0; oh < l.OH; ++oh) {
          const std::int64_t ih = oh * g.stride[0] - g.padding[0] + ki * g.dilation[0];
          T* row = dst + oh * l.OW;
          if (ih < 0 || ih >= l.H) {
            std::fill(row, row + l.OW, T(0));
            continue;
          }
          const T* src = plane + (c * l.H + ih) * l.W;
          for (std::int64_t ow = 0; ow < l.OW; ++ow) {
            const std::int64_t iw = ow * g.stride[1] - g.padding[1] + kj * g.dilation[1];
            row[ow] = iw >= 0 && iw < l.W ? src[iw] : T(0);
          }
        }
      }
}

// The adjoint of im2colBlock: every column entry added back to the pixel it was read from.
// `plane` ([C/g, H, W]) must be zeroed first.
template <class T>
void col2imBlock(const T* cols, std::int64_t ld, std::int64_t col0, const ConvLoop& l, T* plane) {
  const auto& g = l.g;
  for (std::int64_t c = 0; c < l.cg(); ++c)
    for (std::int64_t ki = 0; ki < g.kernel[0]; ++ki)
      for (std::int64_t kj = 0; kj < g.kernel[1]; ++kj) {
        const T* src = cols + ((c * g.kernel[0] + ki) * g.kernel[1] + kj) * ld + col0;
        for (std::int64_t oh = 0; oh < l.OH; ++oh) {
          const std::int64_t ih = oh * g.stride[0] - g.padding[0] + ki * g.dilation[0];
          if (ih < 0 || ih >= l.H) continue;
          T* dst = plane + (c * l.H + ih) * l.W;
          const T* row = src + oh * l.OW;
          for (std::int64_t ow = 0; ow < l.OW; ++ow) {
            const std::int64_t iw = ow * g.stride[1] - g.padding[1] + kj * g.dilation[1];
            if (iw >= 0 && iw < l.W) dst[iw] += row[ow];
          }
        }
      }
}

// The workspace of a chunked kernel: the column matrix and the [O/g, m*OH*OW] partner, sized
// for the largest chunk; chunk() gives views for `m` samples.
struct ChunkBuffers {
  at::Tensor cols, partner;
  std::int64_t chunk;
  ChunkBuffers(const KernelArgs& a, const ConvLoop& l, ir::DType dtype, std::int64_t chunk) : chunk(chunk) {
    at::Tensor all = at::empty({(l.columns() + l.og()) * chunk * l.outPixels()}, optionsFor(a, dtype));
    cols = all.narrow(0, 0, l.columns() * chunk * l.outPixels());
    partner = all.narrow(0, l.columns() * chunk * l.outPixels(), l.og() * chunk * l.outPixels());
  }
  at::Tensor colsFor(const ConvLoop& l, std::int64_t m) const {
    return cols.narrow(0, 0, l.columns() * m * l.outPixels()).view({l.columns(), m * l.outPixels()});
  }
  at::Tensor partnerFor(const ConvLoop& l, std::int64_t m) const {
    return partner.narrow(0, 0, l.og() * m * l.outPixels()).view({l.og(), m * l.outPixels()});
  }
};

// Group `grp` of samples [first, first + m) of an [N, channels, OH, OW] tensor as
// [channels/g, m, OH*OW]: the layout of a chunk's GEMM partner.
at::Tensor chunkView(const at::Tensor& t, std::int64_t first, std::int64_t m, std::int64_t grp, std::int64_t per,
                     std::int64_t pixels) {
  return t.narrow(0, first, m).narrow(1, grp * per, per).view({m, per, pixels}).permute({1, 0, 2});
}

template <class F>
void forEachChunk(const ConvLoop& l, std::int64_t chunk, F&& f) {
  for (std::int64_t first = 0; first < l.N; first += chunk) f(first, std::min(chunk, l.N - first));
}

// The columns of samples [first, first + m), group grp, into cols [C/g*kh*kw, m*OH*OW].
void fillColumns(const at::Tensor& x, const ConvLoop& l, std::int64_t first, std::int64_t m, std::int64_t grp,
                 at::Tensor& cols) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "im2col", [&] {
    for (std::int64_t i = 0; i < m; ++i)
      im2colBlock(x.data_ptr<scalar_t>() + ((first + i) * l.C + grp * l.cg()) * l.H * l.W, l, cols.data_ptr<scalar_t>(),
                  m * l.outPixels(), i * l.outPixels());
  });
}

// The adjoint of fillColumns: the columns of samples [first, first + m), group grp, added back
// into gx's planes (zeroed first).
void addColumnsBack(const at::Tensor& cols, const ConvLoop& l, std::int64_t first, std::int64_t m, std::int64_t grp,
                    const at::Tensor& gx) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, gx.scalar_type(), "col2im", [&] {
    for (std::int64_t i = 0; i < m; ++i)
      col2imBlock(cols.data_ptr<scalar_t>(), m * l.outPixels(), i * l.outPixels(), l,
                  gx.data_ptr<scalar_t>() + ((first + i) * l.C + grp * l.cg()) * l.H * l.W);
  });
}

bool reduced(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf; }

// x[n]'s channels of group `grp` as a column matrix (ConvLoop::columnsOf); bf16 and f16 through
// fillColumns (ATen has no CPU im2col for them).
at::Tensor columnMatrix(const ConvLoop& l, const at::Tensor& x, std::int64_t n, std::int64_t grp, at::Tensor& cols) {
  if (l.g.pointwise() || !reduced(x)) return l.columnsOf(x, n, grp, cols);
  fillColumns(x, l, n, 1, grp, cols);
  return cols;
}

// The temporaries each bf16 or f16 product of the node gets (runtime/host/host_conv_problem.h); 0
// otherwise.
std::int64_t productScratch(onednn::ConvPass pass, const ConvLoop& l, const at::Tensor& t) {
  return host::im2colProductScratch(pass, fromScalarType(t.scalar_type()).value_or(ir::DType::f32), l.N, l.og(),
                                  l.columns(), l.outPixels(), at::get_num_threads());
}

// out = a @ b (+ out when accumulate): bf16 and f16 with `scratch` bytes of planned temporaries
// (runtime/kernels/low_precision_products.h), other dtypes on ATen.
void convProduct(at::Tensor out, const at::Tensor& a, const at::Tensor& b, bool accumulate, std::int64_t scratch) {
  if (lowPrecisionProduct2d(a, b, nullptr, out, scratch, accumulate)) return;
  if (accumulate)
    out.addmm_(a, b);
  else
    at::mm_out(out, a, b);
}

// y[n, group] = w[group] @ columns(x[n, group]) (+ bias).
Results conv2dKernel(const KernelArgs& a) {
  at::Tensor y = resultBuffer(a);
  if (oneDnnConv2d(a, onednn::ConvPass::Forward, y)) return {y};
  const at::Tensor x = a.operands[0].contiguous(), w = a.operands[1].contiguous();
  const ConvLoop l = convLoop(a.node, x.sizes(), w.sizes(), y.sizes());
  const ir::DType dtype = a.node.result()->type().dtype;
  const std::int64_t scratch = productScratch(onednn::ConvPass::Forward, l, x);
  if (const std::int64_t chunk = ir::convChunkSamples(l.N, l.outPixels()); chunk > 1) {
    ChunkBuffers buf(a, l, dtype, chunk);
    forEachChunk(l, chunk, [&](std::int64_t first, std::int64_t m) {
      for (std::int64_t grp = 0; grp < l.groups; ++grp) {
        at::Tensor cols = buf.colsFor(l, m), out = buf.partnerFor(l, m);
        fillColumns(x, l, first, m, grp, cols);
        convProduct(out, w.narrow(0, grp * l.og(), l.og()).view({l.og(), l.columns()}), cols, false, scratch);
        chunkView(y, first, m, grp, l.og(), l.outPixels()).copy_(out.view({l.og(), m, l.outPixels()}));
      }
    });
  } else {
    at::Tensor cols = columnBuffer(a, l, dtype);
    for (std::int64_t n = 0; n < l.N; ++n)
      for (std::int64_t grp = 0; grp < l.groups; ++grp) {
        at::Tensor out = y.select(0, n).narrow(0, grp * l.og(), l.og()).view({l.og(), l.outPixels()});
        at::Tensor weight = w.narrow(0, grp * l.og(), l.og()).view({l.og(), l.columns()});
        convProduct(out, weight, columnMatrix(l, x, n, grp, cols), false, scratch);
      }
  }
  if (a.operands.size() == 3) y.add_(a.operands[2].view({1, l.O, 1, 1}));
  return {y};
}

// gx[n, group] = col2im(w[group]^T @ grad[n, group]).
Results conv2dInputGradKernel(const KernelArgs& a) {
  at::Tensor gx = resultBuffer(a);
  if (oneDnnConv2d(a, onednn::ConvPass::InputGrad, gx)) return {gx};
  const at::Tensor gy = a.operands[0].contiguous(), w = a.operands[1].contiguous();
  const ConvLoop l = convLoop(a.node, gx.sizes(), w.sizes(), gy.sizes());
  const ir::DType dtype = a.node.result()->type().dtype;
  const std::int64_t scratch = productScratch(onednn::ConvPass::InputGrad, l, gy);
  if (const std::int64_t chunk = ir::convChunkSamples(l.N, l.outPixels()); chunk > 1) {
    ChunkBuffers buf(a, l, dtype, chunk);
    gx.zero_();
    forEachChunk(l, chunk, [&](std::int64_t first, std::int64_t m) {
      for (std::int64_t grp = 0; grp < l.groups; ++grp) {
        at::Tensor cols = buf.colsFor(l, m), g = buf.partnerFor(l, m);
        g.view({l.og(), m, l.outPixels()}).copy_(chunkView(gy, first, m, grp, l.og(), l.outPixels()));
        convProduct(cols, w.narrow(0, grp * l.og(), l.og()).view({l.og(), l.columns()}).t(), g, false, scratch);
        addColumnsBack(cols, l, first, m, grp, gx);
      }
    });
    return {gx};
  }
  at::Tensor cols = columnBuffer(a, l, dtype);
  for (std::int64_t n = 0; n < l.N; ++n)
    for (std::int64_t grp = 0; grp < l.groups; ++grp) {
      at::Tensor g = gy.select(0, n).narrow(0, grp * l.og(), l.og()).view({l.og(), l.outPixels()});
      at::Tensor weightT = w.narrow(0, grp * l.og(), l.og()).view({l.og(), l.columns()}).t();
      at::Tensor plane = gx.select(0, n).narrow(0, grp * l.cg(), l.cg());
      if (l.g.pointwise()) {
        convProduct(plane.view({l.cg(), l.H * l.W}), weightT, g, false, scratch);
      } else if (reduced(gx)) {  // ATen has no CPU col2im for bf16 and f16
        convProduct(cols, weightT, g, false, scratch);
        plane.zero_();
        addColumnsBack(cols, l, n, 1, grp, gx);
      } else {
        at::mm_out(cols, weightT, g);
        at::col2im_out(plane, cols, {l.H, l.W}, list(l.g.kernel), list(l.g.dilation), list(l.g.padding),
                       list(l.g.stride));
      }
    }
  return {gx};
}

// gw[group] = sum over n of grad[n, group] @ columns(x[n, group])^T, accumulated in place.
Results conv2dWeightGradKernel(const KernelArgs& a) {
  at::Tensor gw = resultBuffer(a);
  if (oneDnnConv2d(a, onednn::ConvPass::WeightGrad, gw)) return {gw};
  const at::Tensor gy = a.operands[0].contiguous(), x = a.operands[1].contiguous();
  const ConvLoop l = convLoop(a.node, x.sizes(), gw.sizes(), gy.sizes());
  const ir::DType dtype = a.node.result()->type().dtype;
  const std::int64_t scratch = productScratch(onednn::ConvPass::WeightGrad, l, x);
  if (const std::int64_t chunk = ir::convChunkSamples(l.N, l.outPixels()); chunk > 1) {
    ChunkBuffers buf(a, l, dtype, chunk);
    forEachChunk(l, chunk, [&](std::int64_t first, std::int64_t m) {
      for (std::int64_t grp = 0; grp < l.groups; ++grp) {
        at::Tensor cols = buf.colsFor(l, m), g = buf.partnerFor(l, m);
        g.view({l.og(), m, l.outPixels()}).copy_(chunkView(gy, first, m, grp, l.og(), l.outPixels()));
        fillColumns(x, l, first, m, grp, cols);
        at::Tensor out = gw.narrow(0, grp * l.og(), l.og()).view({l.og(), l.columns()});
        convProduct(out, g, cols.t(), first > 0, scratch);
      }
    });
    return {gw};
  }
  at::Tensor cols = columnBuffer(a, l, dtype);
  for (std::int64_t n = 0; n < l.N; ++n)
    for (std::int64_t grp = 0; grp < l.groups; ++grp) {
      at::Tensor g = gy.select(0, n).narrow(0, grp * l.og(), l.og()).view({l.og(), l.outPixels()});
      at::Tensor out = gw.narrow(0, grp * l.og(), l.og()).view({l.og(), l.columns()});
      convProduct(out, g, columnMatrix(l, x, n, grp, cols).t(), n > 0, scratch);
    }
  return {gw};
}

// ---- pooling ----------------------------------------------------------------------------------

Results maxPool2dKernel(const KernelArgs& a) {
  const ir::WindowGeometry g = geometry(a.node);
  at::Tensor y = resultBuffer(a, 0), indices = resultBuffer(a, 1);
  at::max_pool2d_with_indices_out(y, indices, a.operands[0].contiguous(), list(g.kernel), list(g.stride),
                                  list(g.padding), list(g.dilation), g.ceilMode);
  return {y, indices};
}

// ATen's pooling backwards read the forward input only for its shape: the result buffer,
// which has that shape, stands in for it, so the input need not stay alive.
Results maxPool2dBackwardKernel(const KernelArgs& a) {
  const ir::WindowGeometry g = geometry(a.node);
  at::Tensor gx = resultBuffer(a);
  at::max_pool2d_with_indices_backward_out(gx, a.operands[0].contiguous(), gx, list(g.kernel), list(g.stride),
                                           list(g.padding), list(g.dilation), g.ceilMode,
                                           a.operands[1].contiguous());
  return {gx};
}

Results avgPool2dKernel(const KernelArgs& a) {
  const ir::WindowGeometry g = geometry(a.node);
  at::Tensor y = resultBuffer(a);
  const bool countPad = ir::getBool(a.node.attrs(), "count_include_pad").value_or(true);
  at::avg_pool2d_out(y, a.operands[0].contiguous(), list(g.kernel), list(g.stride), list(g.padding), g.ceilMode,
                     countPad);
  return {y};
}

Results avgPool2dBackwardKernel(const KernelArgs& a) {
  const ir::WindowGeometry g = geometry(a.node);
  at::Tensor gx = resultBuffer(a);
  const bool countPad = ir::getBool(a.node.attrs(), "count_include_pad").value_or(true);
  at::avg_pool2d_backward_out(gx, a.operands[0].contiguous(), gx, list(g.kernel), list(g.stride), list(g.padding),
                              g.ceilMode, countPad, c10::nullopt);
  return {gx};
}

// Adaptive average pooling (PyTorch's windows: rows [floor(i H / oh), ceil((i + 1) H / oh))),
// written straight into the planned buffers on the CPU: the sums accumulate in at::opmath_type
// (float for f16 and bf16), one plane of the N x C planes per task, and the backward adds
// each output cell's share to its window (windows may overlap), so neither allocates.
struct AdaptiveWindows {
  std::int64_t in, out;
  std::int64_t begin(std::int64_t i) const { return i * in / out; }
  std::int64_t end(std::int64_t i) const { return ((i + 1) * in + out - 1) / out; }
};

Results adaptiveAvgPool2dKernel(const KernelArgs& a) {
  at::Tensor y = resultBuffer(a);
  const at::Tensor x = a.operands[0].contiguous();
  const std::int64_t planes = x.size(0) * x.size(1);
  const AdaptiveWindows rows{x.size(2), y.size(2)}, cols{x.size(3), y.size(3)};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "adaptive_avg_pool2d", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* in = x.data_ptr<scalar_t>();
    scalar_t* out = y.data_ptr<scalar_t>();
    at::parallel_for(0, planes, 1, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t p = first; p < last; ++p) {
        const scalar_t* plane = in + p * rows.in * cols.in;
        for (std::int64_t i = 0; i < rows.out; ++i)
          for (std::int64_t j = 0; j < cols.out; ++j) {
            acc_t sum = 0;
            for (std::int64_t r = rows.begin(i); r < rows.end(i); ++r)
              for (std::int64_t c = cols.begin(j); c < cols.end(j); ++c) sum += static_cast<acc_t>(plane[r * cols.in + c]);
            const auto count = static_cast<acc_t>((rows.end(i) - rows.begin(i)) * (cols.end(j) - cols.begin(j)));
            out[(p * rows.out + i) * cols.out + j] = static_cast<scalar_t>(sum / count);
          }
      }
    });
  });
  return {y};
}

Results adaptiveAvgPool2dBackwardKernel(const KernelArgs& a) {
  at::Tensor gx = resultBuffer(a);
  const at::Tensor g = a.operands[0].contiguous();
  const std::int64_t planes = gx.size(0) * gx.size(1);
  const AdaptiveWindows rows{gx.size(2), g.size(2)}, cols{gx.size(3), g.size(3)};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "adaptive_avg_pool2d_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* grad = g.data_ptr<scalar_t>();
    scalar_t* out = gx.data_ptr<scalar_t>();
    at::parallel_for(0, planes, 1, [&](std::int64_t first, std::int64_t last) {
      for (std::int64_t p = first; p < last; ++p) {
        scalar_t* plane = out + p * rows.in * cols.in;
        std::fill(plane, plane + rows.in * cols.in, scalar_t(0));
        for (std::int64_t i = 0; i < rows.out; ++i)
          for (std::int64_t j = 0; j < cols.out; ++j) {
            const auto count = static_cast<acc_t>((rows.end(i) - rows.begin(i)) * (cols.end(j) - cols.begin(j)));
            const acc_t share = static_cast<acc_t>(grad[(p * rows.out + i) * cols.out + j]) / count;
            for (std::int64_t r = rows.begin(i); r < rows.end(i); ++r)
              for (std::int64_t c = cols.begin(j); c < cols.end(j); ++c)
                plane[r * cols.in + c] = static_cast<scalar_t>(static_cast<acc_t>(plane[r * cols.in + c]) + share);
          }
      }
    });
  });
  return {gx};
}

// Portable: ATen's pooling kernels, with their out= variants.
const KernelEntry kConv[] = {
    {"max_pool2d", maxPool2dKernel},
    {"max_pool2d_backward", maxPool2dBackwardKernel},
    {"avg_pool2d", avgPool2dKernel},
    {"avg_pool2d_backward", avgPool2dBackwardKernel},
};

// The host's own: im2col and oneDNN convolutions, loops over host memory. Their portable
// counterparts are runtime/kernels/kernels_conv_device.cpp's.
const KernelEntry kHostConv[] = {
    {"conv2d", conv2dKernel},
    {"conv2d_input_grad", conv2dInputGradKernel},
    {"conv2d_weight_grad", conv2dWeightGradKernel},
    {"adaptive_avg_pool2d", adaptiveAvgPool2dKernel},
    {"adaptive_avg_pool2d_backward", adaptiveAvgPool2dBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> convKernels() { return kConv; }
std::span<const KernelEntry> hostConvKernels() { return kHostConv; }

}  // namespace gradc::runtime
