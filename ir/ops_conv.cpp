// The op table's convolution and pooling over NCHW images (ir/window_geometry.h).
//
// conv2d(x[N, C, H, W], w[O, C/g, kh, kw] [, b[O]]){stride, padding, dilation, groups}
//   -> y[N, O, OH, OW]. The kernel (runtime/kernels/kernels_conv.cpp) lowers each sample and group to
//   one GEMM against an im2col matrix of [C/g * kh * kw, OH * OW] elements: that matrix is its
//   workspace, except for pointwise windows (1x1, stride 1, no padding), which read x directly.
//   Small outputs batch several samples per GEMM (ir/window_geometry.h, convChunkSamples): the
//   workspace is then the chunk's column matrix and its [O/g, samples * OH * OW] result.
// conv2d_input_grad(grad, w){..., input_shape} and conv2d_weight_grad(grad, x){..., weight_shape}
//   are its two backward GEMMs (col2im of w^T grad; grad times the im2col matrix), each with
//   the same column workspace; the bias gradient is a sum over (N, OH, OW). That column matrix
//   is the op table's (portable) rule. The host's own rules (runtime/host/host_conv_problem.h)
//   add its bf16 and f16 GEMMs' temporaries, and run f32 problems that oneDNN has a blocked
//   kernel for there, with oneDNN's workspace.
// max_pool2d(x){kernel, stride, padding, dilation, ceil_mode} -> (y, indices i64), the indices
//   of each window's maximum (saved for backward, as PyTorch saves them);
//   max_pool2d_backward(grad, indices){..., input_shape} scatters grad to them.
// avg_pool2d(x){kernel, stride, padding, ceil_mode, count_include_pad} and
//   avg_pool2d_backward(grad){..., input_shape}.
// adaptive_avg_pool2d(x){output_size} -> [N, C, oh, ow] over PyTorch's adaptive windows (the
//   frontend uses avg_pool2d when the sizes divide the input evenly) and
//   adaptive_avg_pool2d_backward(grad){input_shape}.
// The backward ops take the input's shape as an attribute, so they keep neither x nor w alive
// beyond what their own arithmetic reads.
#include <algorithm>
#include <string>

#include "ir/conv_problem.h"
#include "ir/op_rules.h"
#include "ir/window_geometry.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

Status requireImage(const TensorType& t, std::string_view what) {
  if (Status s = requireFloat(t, what); !s) return s;
  if (t.rank() != 4) return Error{std::string(what) + " must be an image batch [N, C, H, W], got " + typeStr(t)};
  return {};
}

Expected<WindowGeometry> window(const OpContext& c, std::optional<std::array<std::int64_t, 2>> kernel = std::nullopt) {
  WindowGeometry g;
  if (std::optional<std::string> e = readWindow(c.attrs, g, kernel)) return Error{*e};
  return g;
}

// The output [N, channels, OH, OW] of a window over x's spatial axes.
Results windowOutput(const TensorType& x, const WindowGeometry& g, std::int64_t channels) {
  const std::int64_t oh = g.outExtent(0, x.shape[2]), ow = g.outExtent(1, x.shape[3]);
  if (oh <= 0 || ow <= 0)
    return fail("the window (kernel " + std::to_string(g.kernel[0]) + "x" + std::to_string(g.kernel[1]) +
                ", dilation " + std::to_string(g.dilation[0]) + "x" + std::to_string(g.dilation[1]) + ", padding " +
                std::to_string(g.padding[0]) + "x" + std::to_string(g.padding[1]) + ") does not fit the input " +
                typeStr(x));
  return single({x.dtype, {x.shape[0], channels, oh, ow}});
}

// ---- convolution ----------------------------------------------------------------------------

struct ConvShapes {
  TensorType x, w, y;
  WindowGeometry g;
  std::int64_t groups = 1;
};

// Checks x, w (and the groups) and infers y; the shared core of conv2d and its two gradients.
Expected<ConvShapes> convShapes(const OpContext& c, const TensorType& x, const TensorType& w) {
  if (Status s = requireImage(x, "the input"); !s) return s.error();
  if (w.dtype != x.dtype || w.rank() != 4)
    return fail("the weight must be " + std::string(dtypeName(x.dtype)) + "[out, in / groups, kh, kw], got " +
                typeStr(w));
  const std::int64_t groups = getInt(c.attrs, "groups").value_or(1);
  if (groups < 1) return fail("groups must be >= 1, got " + std::to_string(groups));
  const std::int64_t C = x.shape[1], O = w.shape[0];
  if (C % groups != 0 || O % groups != 0)
    return fail("groups = " + std::to_string(groups) + " must divide the input channels (" + std::to_string(C) +
                ") and the output channels (" + std::to_string(O) + ")");
  if (w.shape[1] != C / groups)
    return fail("the weight " + typeStr(w) + " must have in / groups = " + std::to_string(C / groups) +
                " input channels for the input " + typeStr(x));
  Expected<WindowGeometry> g = window(c, std::array<std::int64_t, 2>{w.shape[2], w.shape[3]});
  if (!g) return g.error();
  Results y = windowOutput(x, *g, O);
  if (!y) return y.error();
  return ConvShapes{x, w, (*y)[0], *g, groups};
}

Status checkBias(const TensorType& b, const TensorType& w) {
  if (b.dtype != w.dtype || b.shape != Shape{w.shape[0]})
    return Error{"the bias must be " + std::string(dtypeName(w.dtype)) + "[" + std::to_string(w.shape[0]) + "], got " +
                 typeStr(b)};
  return {};
}

Results inferConv2d(const OpContext& c) {
  Expected<ConvShapes> s = convShapes(c, c.inputs[0], c.inputs[1]);
  if (!s) return s.error();
  if (c.inputs.size() == 3)
    if (Status b = checkBias(c.inputs[2], c.inputs[1]); !b) return b.error();
  return std::vector<TensorType>{s->y};
}

Expected<Shape> shapeAttr(const OpContext& c, const char* key) {
  std::vector<std::int64_t> shape = *getIntList(c.attrs, key);
  if (shape.size() != 4) return fail(std::string(key) + " must have 4 extents, got " + shapeToString(shape));
  if (!checkedNumel(shape)) return fail(std::string(key) + " " + shapeToString(shape) + " is not a valid shape");
  return shape;
}

// conv2d_input_grad(grad, w){input_shape}: the grad must be what conv2d of that input produces.
Results inferConv2dInputGrad(const OpContext& c) {
  Expected<Shape> xs = shapeAttr(c, "input_shape");
  if (!xs) return xs.error();
  const TensorType x{c.inputs[0].dtype, *xs};
  Expected<ConvShapes> s = convShapes(c, x, c.inputs[1]);
  if (!s) return s.error();
  if (c.inputs[0] != s->y) return fail("the gradient must be " + typeStr(s->y) + ", got " + typeStr(c.inputs[0]));
  return std::vector<TensorType>{x};
}

Results inferConv2dWeightGrad(const OpContext& c) {
  Expected<Shape> ws = shapeAttr(c, "weight_shape");
  if (!ws) return ws.error();
  const TensorType w{c.inputs[1].dtype, *ws};
  Expected<ConvShapes> s = convShapes(c, c.inputs[1], w);
  if (!s) return s.error();
  if (c.inputs[0] != s->y) return fail("the gradient must be " + typeStr(s->y) + ", got " + typeStr(c.inputs[0]));
  return std::vector<TensorType>{w};
}

// The three ops share a GEMM of [O/g, C/g*kh*kw] x [C/g*kh*kw, OH*OW] per sample and group.
std::int64_t convGemmFlops(const TensorType& w, const TensorType& y) {
  const std::int64_t perOutput = 2 * w.shape[1] * w.shape[2] * w.shape[3];
  return saturatingMul(perOutput, y.numel());
}

std::int64_t flopsConv2d(const OpContext& c, Types r) {
  std::int64_t f = convGemmFlops(c.inputs[1], r[0]);
  return c.inputs.size() == 3 ? saturatingAdd(f, r[0].numel()) : f;
}
std::int64_t flopsConv2dInputGrad(const OpContext& c, Types) { return convGemmFlops(c.inputs[1], c.inputs[0]); }
std::int64_t flopsConv2dWeightGrad(const OpContext& c, Types r) { return convGemmFlops(r[0], c.inputs[0]); }

// The im2col kernel's columns (ir/conv_problem.h). The host's rules add its products'
// temporaries and its oneDNN passes (runtime/host/host_conv_problem.h).
std::int64_t workspaceConv2d(const OpContext& c, Types r) { return im2colWorkspaceBytes(c.attrs, c.inputs[1], r[0]); }
std::int64_t workspaceConv2dInputGrad(const OpContext& c, Types) {
  return im2colWorkspaceBytes(c.attrs, c.inputs[1], c.inputs[0]);
}
std::int64_t workspaceConv2dWeightGrad(const OpContext& c, Types r) {
  return im2colWorkspaceBytes(c.attrs, r[0], c.inputs[0]);
}

// ---- pooling --------------------------------------------------------------------------------

Results inferMaxPool2d(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireImage(x, "the input"); !s) return s.error();
  Expected<WindowGeometry> g = window(c);
  if (!g) return g.error();
  for (int a = 0; a < 2; ++a)
    if (g->padding[a] * 2 > g->kernel[a])
      return fail("padding must be at most half the kernel, got padding " + std::to_string(g->padding[a]) +
                  " for kernel " + std::to_string(g->kernel[a]));
  Results y = windowOutput(x, *g, x.shape[1]);
  if (!y) return y;
  TensorType indices{DType::i64, (*y)[0].shape};
  return std::vector<TensorType>{(*y)[0], indices};
}

Results inferAvgPool2d(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireImage(x, "the input"); !s) return s.error();
  Expected<WindowGeometry> g = window(c);
  if (!g) return g.error();
  if (g->dilation != std::array<std::int64_t, 2>{1, 1}) return fail("avg_pool2d has no dilation");
  for (int a = 0; a < 2; ++a)
    if (g->padding[a] * 2 > g->kernel[a])
      return fail("padding must be at most half the kernel, got padding " + std::to_string(g->padding[a]) +
                  " for kernel " + std::to_string(g->kernel[a]));
  return windowOutput(x, *g, x.shape[1]);
}

// Pooling backward: grad (and max pooling's indices) have the forward output's type.
Results inferPoolBackward(const OpContext& c, bool withIndices) {
  Expected<Shape> xs = shapeAttr(c, "input_shape");
  if (!xs) return xs.error();
  const TensorType x{c.inputs[0].dtype, *xs};
  std::vector<TensorType> forwardInputs{x};
  Results y = withIndices ? inferMaxPool2d(OpContext{forwardInputs, c.attrs}) : inferAvgPool2d(OpContext{forwardInputs, c.attrs});
  if (!y) return y;
  if (c.inputs[0] != (*y)[0]) return fail("the gradient must be " + typeStr((*y)[0]) + ", got " + typeStr(c.inputs[0]));
  if (withIndices && c.inputs[1] != (*y)[1])
    return fail("the indices must be " + typeStr((*y)[1]) + ", got " + typeStr(c.inputs[1]));
  return single(x);
}
Results inferMaxPool2dBackward(const OpContext& c) { return inferPoolBackward(c, true); }
Results inferAvgPool2dBackward(const OpContext& c) { return inferPoolBackward(c, false); }

// adaptive_avg_pool2d{output_size = [oh, ow]}: x[N, C, H, W] -> [N, C, oh, ow]; output cell
// (i, j) averages rows [floor(i H / oh), ceil((i + 1) H / oh)) and the columns likewise
// (PyTorch's rule), so windows may differ in size and overlap when oh does not divide H.
Results inferAdaptiveAvgPool2d(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireImage(x, "the input"); !s) return s.error();
  std::optional<std::vector<std::int64_t>> size = getIntList(c.attrs, "output_size");
  if (!size || size->size() != 2 || (*size)[0] < 1 || (*size)[1] < 1)
    return fail("output_size must be [height, width] of positive sizes");
  return single(TensorType{x.dtype, {x.shape[0], x.shape[1], (*size)[0], (*size)[1]}});
}
Results inferAdaptiveAvgPool2dBackward(const OpContext& c) {
  Expected<Shape> xs = shapeAttr(c, "input_shape");
  if (!xs) return xs.error();
  const TensorType x{c.inputs[0].dtype, *xs};
  if (Status s = requireImage(x, "input_shape"); !s) return s.error();
  const Shape& g = c.inputs[0].shape;
  if (g.size() != 4 || g[0] != x.shape[0] || g[1] != x.shape[1])
    return fail("the gradient must be [N, C, oh, ow] of the input's N and C, got " + typeStr(c.inputs[0]));
  return single(x);
}
// Each input element is summed into at most a few windows; each output divides once.
std::int64_t flopsAdaptivePool(const OpContext& c, Types r) { return c.inputs[0].numel() + r[0].numel(); }

std::int64_t flopsPooling(const OpContext& c, Types r) {
  WindowGeometry g;
  readWindow(c.attrs, g);
  return saturatingMul(r[0].numel(), g.kernel[0] * g.kernel[1]);
}
std::int64_t flopsPoolingBackward(const OpContext& c, Types) {
  WindowGeometry g;
  readWindow(c.attrs, g);
  return saturatingMul(c.inputs[0].numel(), g.kernel[0] * g.kernel[1]);
}

}  // namespace

std::vector<OpInfo> convOps() {
  const AttrSpec stride{"stride", AttrKind::IntList, true, "[sh, sw]"};
  const AttrSpec padding{"padding", AttrKind::IntList, true, "[ph, pw]: zeros (max pooling: -inf) added on each side"};
  const AttrSpec dilation{"dilation", AttrKind::IntList, true, "[dh, dw]: spacing of the window's taps"};
  const AttrSpec groups{"groups", AttrKind::Int, true, "channel groups (C and O divisible by it)"};
  const AttrSpec kernel{"kernel", AttrKind::IntList, true, "[kh, kw]: the window"};
  const AttrSpec ceil{"ceil_mode", AttrKind::Bool, true, "round the output extent up (PyTorch's ceil_mode)"};
  const AttrSpec countPad{"count_include_pad", AttrKind::Bool, true, "padding zeros count in the average"};
  const AttrSpec inputShape{"input_shape", AttrKind::IntList, true, "the forward input's shape"};
  return {
      {.name = "conv2d", .minInputs = 2, .maxInputs = 3, .attrs = {stride, padding, dilation, groups},
       .infer = inferConv2d, .flops = flopsConv2d, .workspaceBytes = workspaceConv2d,
       .summary = "2-D convolution (cross-correlation) of x[N, C, H, W] with weight[O, C/groups, kh, kw] (+ bias[O])"},
      {.name = "conv2d_input_grad", .minInputs = 2, .maxInputs = 2,
       .attrs = {stride, padding, dilation, groups, inputShape}, .infer = inferConv2dInputGrad,
       .flops = flopsConv2dInputGrad, .workspaceBytes = workspaceConv2dInputGrad,
       .summary = "(grad, weight) -> the gradient of conv2d's input"},
      {.name = "conv2d_weight_grad", .minInputs = 2, .maxInputs = 2,
       .attrs = {stride, padding, dilation, groups, {"weight_shape", AttrKind::IntList, true, "the weight's shape"}},
       .infer = inferConv2dWeightGrad, .flops = flopsConv2dWeightGrad, .workspaceBytes = workspaceConv2dWeightGrad,
       .summary = "(grad, x) -> the gradient of conv2d's weight"},
      {.name = "max_pool2d", .minInputs = 1, .maxInputs = 1, .attrs = {kernel, stride, padding, dilation, ceil},
       .infer = inferMaxPool2d, .flops = flopsPooling,
       .summary = "maximum over each window of x[N, C, H, W]; results (y, indices of the maxima)"},
      {.name = "max_pool2d_backward", .minInputs = 2, .maxInputs = 2,
       .attrs = {kernel, stride, padding, dilation, ceil, inputShape}, .infer = inferMaxPool2dBackward,
       .flops = flopsPoolingBackward, .summary = "(grad, indices) -> grad scattered to each window's maximum"},
      {.name = "avg_pool2d", .minInputs = 1, .maxInputs = 1, .attrs = {kernel, stride, padding, ceil, countPad},
       .infer = inferAvgPool2d, .flops = flopsPooling, .summary = "mean over each window of x[N, C, H, W]"},
      {.name = "avg_pool2d_backward", .minInputs = 1, .maxInputs = 1,
       .attrs = {kernel, stride, padding, ceil, countPad, inputShape}, .infer = inferAvgPool2dBackward,
       .flops = flopsPoolingBackward, .summary = "grad -> grad spread evenly over each window"},
      {.name = "adaptive_avg_pool2d", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"output_size", AttrKind::IntList, true, "[oh, ow]: the output's height and width"}},
       .infer = inferAdaptiveAvgPool2d, .flops = flopsAdaptivePool,
       .summary = "mean over PyTorch's adaptive windows of x[N, C, H, W] -> [N, C, oh, ow]"},
      {.name = "adaptive_avg_pool2d_backward", .minInputs = 1, .maxInputs = 1, .attrs = {inputShape},
       .infer = inferAdaptiveAvgPool2dBackward, .flops = flopsAdaptivePool,
       .summary = "grad[N, C, oh, ow] -> grad spread evenly over each adaptive window of the input"},
  };
}

}  // namespace gradc::ir
