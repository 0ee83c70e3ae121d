// Training ops of the op table: backward kernels (created by the autodiff pass, mostly
// one-to-one with ATen's backward kernels) and optimizer updates (created by the optimizer
// pass). Conventions as in ir/ops.cpp.
//
// Optimizer step ops update their first operands in place (parameter, then optimizer state)
// and have no results; they are marked sideEffects so no pass removes them, and they must be
// the last users of the tensors they update.
#include <algorithm>
#include <string>

#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;

using Types = std::span<const TensorType>;

Status sameType(const TensorType& a, const TensorType& b, std::string_view what) {
  if (a != b) return Error{std::string(what) + " must have the same type, got " + typeStr(a) + " and " + typeStr(b)};
  return {};
}

// (grad, saved) -> like grad: relu/tanh/sigmoid/gelu backward.
Results inferGradLikeSaved(const OpContext& c) {
  if (Status s = requireFloat(c.inputs[0], "the gradient"); !s) return s.error();
  if (Status s = sameType(c.inputs[0], c.inputs[1], "the gradient and the saved tensor"); !s) return s.error();
  return std::vector<TensorType>{c.inputs[0]};
}

Results inferGeluBackward(const OpContext& c) {
  if (auto a = getString(c.attrs, "approximate"); a && *a != "none" && *a != "tanh")
    return fail("approximate must be \"none\" or \"tanh\", got \"" + *a + "\"");
  return inferGradLikeSaved(c);
}

Results inferSoftmaxBackward(const OpContext& c) {
  Results r = inferGradLikeSaved(c);
  if (!r) return r;
  if (!normalizeAxis(*getInt(c.attrs, "dim"), c.inputs[0].rank())) return fail("dim is out of range");
  return r;
}

Results inferSumTo(const OpContext& c) {
  std::vector<std::int64_t> shape = *getIntList(c.attrs, "shape");
  if (shape.size() > c.inputs[0].shape.size() || !checkedNumel(shape))
    return fail("cannot sum " + typeStr(c.inputs[0]) + " to " + shapeToString(shape));
  std::optional<Shape> b = broadcastShapes(shape, c.inputs[0].shape);
  if (!b || *b != c.inputs[0].shape)
    return fail("cannot sum " + typeStr(c.inputs[0]) + " to " + shapeToString(shape) + ": not a broadcast of it");
  return std::vector<TensorType>{{c.inputs[0].dtype, shape}};
}


Results inferLayerNormBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  const TensorType& x = c.inputs[1];
  if (Status s = sameType(g, x, "the gradient and the input"); !s) return s.error();
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  Shape stats = x.shape;
  stats.back() = 1;
  for (size_t i : {2, 3})
    if (c.inputs[i] != TensorType{x.dtype, stats})
      return fail(std::string(i == 2 ? "mean" : "rstd") + " must be " + typeStr({x.dtype, stats}) + ", got " +
                  typeStr(c.inputs[i]));
  TensorType param{x.dtype, {x.shape.back()}};
  for (size_t i : {4, 5})
    if (c.inputs[i] != param)
      return fail(std::string(i == 4 ? "the weight" : "the bias") + " must be " + typeStr(param) + ", got " +
                  typeStr(c.inputs[i]));
  return std::vector<TensorType>{x, param, param};
}

std::int64_t flopsLayerNormBackward(const OpContext& c, Types) { return 12 * c.inputs[1].numel(); }

Results inferSliceBackward(const OpContext& c) {
  std::vector<std::int64_t> in = *getIntList(c.attrs, "input_shape");
  const TensorType& g = c.inputs[0];
  if (!checkedNumel(in) || static_cast<int>(in.size()) != g.rank())
    return fail("input_shape " + shapeToString(in) + " does not fit the gradient " + typeStr(g));
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), g.rank());
  std::int64_t start = *getInt(c.attrs, "start"), end = *getInt(c.attrs, "end");
  if (!dim || start < 0 || end > in[*dim] || start >= end) return fail("slice out of range");
  Shape expected = in;
  expected[*dim] = end - start;
  if (g.shape != expected) return fail("the gradient must be " + shapeToString(expected) + ", got " + typeStr(g));
  return std::vector<TensorType>{{g.dtype, in}};
}

Results inferSelectBackward(const OpContext& c) {
  std::vector<std::int64_t> in = *getIntList(c.attrs, "input_shape");
  const TensorType& g = c.inputs[0];
  if (!checkedNumel(in) || static_cast<int>(in.size()) != g.rank() + 1)
    return fail("input_shape " + shapeToString(in) + " does not fit the gradient " + typeStr(g));
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), g.rank() + 1);
  std::int64_t index = *getInt(c.attrs, "index");
  if (!dim || index < 0 || index >= in[*dim]) return fail("index out of range");
  Shape expected = in;
  expected.erase(expected.begin() + *dim);
  if (g.shape != expected) return fail("the gradient must be " + shapeToString(expected) + ", got " + typeStr(g));
  return std::vector<TensorType>{{g.dtype, in}};
}

Results inferConcat(const OpContext& c) {
  const TensorType& first = c.inputs[0];
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), first.rank());
  if (!dim) return fail("dim is out of range for " + typeStr(first));
  Shape out = first.shape;
  for (size_t i = 1; i < c.inputs.size(); ++i) {
    const TensorType& t = c.inputs[i];
    Shape a = t.shape, b = first.shape;
    if (t.dtype != first.dtype || t.rank() != first.rank() || (a[*dim] = 0, b[*dim] = 0, a != b))
      return fail("operand " + std::to_string(i) + " is " + typeStr(t) + ", which does not concatenate with " +
                  typeStr(first) + " along dim " + std::to_string(*dim));
    out[*dim] += t.shape[*dim];
  }
  return single({first.dtype, out});
}

Results inferEmbeddingBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  const TensorType& idx = c.inputs[1];
  if (!isInteger(idx.dtype)) return fail("the indices must be i64 or i32, got " + typeStr(idx));
  Shape expected = idx.shape;
  if (g.rank() != idx.rank() + 1) return fail("the gradient " + typeStr(g) + " does not fit indices " + typeStr(idx));
  expected.push_back(g.shape.back());
  if (g.shape != expected) return fail("the gradient " + typeStr(g) + " does not fit indices " + typeStr(idx));
  std::int64_t num = *getInt(c.attrs, "num");
  return single({g.dtype, {num, g.shape.back()}});
}

std::optional<std::int64_t> embeddingBackwardRows(const OpContext& c, size_t operand) {
  if (operand != 1) return std::nullopt;
  return *getInt(c.attrs, "num");
}

std::optional<std::int64_t> crossEntropyBackwardClasses(const OpContext& c, size_t operand) {
  if (operand != 2) return std::nullopt;
  return c.inputs[1].shape.back();
}

std::int64_t flopsEmbeddingBackward(const OpContext& c, Types) { return c.inputs[0].numel(); }

Results inferCrossEntropyBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  if (g.rank() != 0 || !isFloating(g.dtype)) return fail("the gradient must be a float scalar, got " + typeStr(g));
  std::vector<TensorType> fwd{c.inputs[1], c.inputs[2]};
  const OpInfo* ce = findOp("cross_entropy");
  Results r = inferResultTypes(*ce, fwd, {});
  if (!r) return r;
  return std::vector<TensorType>{c.inputs[1]};
}

std::int64_t flopsCrossEntropyBackward(const OpContext& c, Types) { return 6 * c.inputs[1].numel(); }
// The kernel writes softmax(logits) straight into its result and keeps one value per row
// (the row's normaliser): a [rows, 1] column. With ignore_index or label smoothing it fixes the rows up in one
// loop instead, and allocates nothing. Either way an i32 target is widened to i64 first.
std::int64_t workspaceCrossEntropyBackward(const OpContext& c, Types) {
  const std::int64_t widened = c.inputs[2].dtype == DType::i32 ? c.inputs[2].numel() * 8 : 0;
  if (getInt(c.attrs, "ignore_index") || getFloat(c.attrs, "label_smoothing").value_or(0.0) > 0) return widened;
  // The -1 column scattered into the probabilities, then (after it is freed) grad / rows: a
  // wrapped f64 number, its cast and the quotient. The second is larger below 4 rows.
  const DType t = c.inputs[1].dtype;
  return std::max(c.inputs[2].numel() * dtypeSize(t), scalarOperandBytes(t) + dtypeSize(t)) + widened;
}

// ATen's CPU kernel sums the weight and bias gradients in per-thread partial rows:
// 2 x threads x D values.
std::int64_t workspaceLayerNormBackward(const OpContext& c, Types) {
  const TensorType& x = c.inputs[1];
  return 2 * c.kernelThreads * x.shape.back() * dtypeSize(x.dtype);
}

// One 0-dim f32 norm per operand and their stack (4 bytes each), and the final norm's 0-dim
// partial. An operand in another dtype has its norm computed in that dtype, then cast to f32:
// both alive beside the norms before it, briefly (never above the stack's peak for bf16 and
// f16, whose norms are smaller than an f32's; an f64 norm can be).
std::int64_t workspaceGlobalNorm(const OpContext& c, Types) {
  const auto operands = static_cast<std::int64_t>(c.inputs.size());
  std::int64_t peak = 8 * operands + 4;
  for (std::int64_t i = 0; i < operands; ++i)
    if (c.inputs[static_cast<size_t>(i)].dtype != DType::f32)
      peak = std::max(peak, 4 * i + dtypeSize(c.inputs[static_cast<size_t>(i)].dtype) + 4);
  return peak;
}

// (norm + 1e-6).reciprocal() * max_norm: three 0-dim f32 temporaries alive together, and the
// Scalar wrapper of the multiply.
std::int64_t workspaceClipCoef(const OpContext&, Types) { return 3 * 4 + scalarOperandBytes(DType::f32); }

// The updates follow torch.optim op by op (runtime/kernels/kernels_optimizer.cpp): each op with a
// Scalar operand holds that Scalar's wrapper while it runs (scalarOperandBytes); AdamW's
// denominator sqrt(v) is a parameter-sized temporary, and so is SGD's gradient plus weight
// decay. A clipping scale multiplies the gradient in place, without a temporary.
// The ATen path's sqrt(v) temporary and a wrapped Scalar; the one-pass (fused) update needs none.
std::int64_t workspaceAdamwStep(const OpContext& c, Types) {
  if (getBool(c.attrs, "fused").value_or(false)) return 0;
  return c.inputs[0].bytes() + scalarOperandBytes(c.inputs[0].dtype);
}

std::int64_t workspaceSgdStep(const OpContext& c, Types) {
  const bool decay = getFloat(c.attrs, "weight_decay").value_or(0) != 0;
  const bool momentum = getFloat(c.attrs, "momentum").value_or(0) != 0;
  return (decay ? c.inputs[0].bytes() : 0) + (momentum ? scalarOperandBytes(c.inputs[0].dtype) : 0);
}

// The [s, t] boolean mask of positions above the diagonal.
std::int64_t workspaceCausalMaskBackward(const OpContext& c, Types) {
  const Shape& s = c.inputs[0].shape;
  return s[s.size() - 2] * s[s.size() - 1];
}

Results inferMseBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  if (g.rank() != 0 || !isFloating(g.dtype)) return fail("the gradient must be a float scalar, got " + typeStr(g));
  if (Status s = sameType(c.inputs[1], c.inputs[2], "input and target"); !s) return s.error();
  return std::vector<TensorType>{c.inputs[1]};
}

Results inferLinearWeightGrad(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  const TensorType& x = c.inputs[1];
  if (g.dtype != x.dtype || g.rank() != x.rank() || g.rank() < 1 ||
      !std::equal(g.shape.begin(), g.shape.end() - 1, x.shape.begin()))
    return fail("the output gradient " + typeStr(g) + " and the input " + typeStr(x) + " must share leading dims");
  if (Status s = requireFloat(g, "the gradient"); !s) return s.error();
  return single({g.dtype, {g.shape.back(), x.shape.back()}});
}

std::int64_t flopsLinearWeightGrad(const OpContext& c, Types) {
  return saturatingMul(saturatingMul(2, c.inputs[0].numel()), c.inputs[1].shape.back());
}

Results inferFull(const OpContext& c) {
  std::vector<std::int64_t> shape = *getIntList(c.attrs, "shape");
  if (!checkedNumel(shape)) return fail("shape " + shapeToString(shape) + " must have positive extents");
  return single({*getDType(c.attrs, "dtype"), shape});
}

// ---- optimizer ---------------------------------------------------------------------------------

Status requireScalar(const TensorType& t, std::string_view what, bool floating = true) {
  if (t.rank() != 0 || isFloating(t.dtype) != floating)
    return Error{std::string(what) + " must be a" + (floating ? " float" : "n integer") + " scalar, got " + typeStr(t)};
  return {};
}

Results inferGlobalNorm(const OpContext& c) {
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (Status s = requireFloat(c.inputs[i], "operand " + std::to_string(i)); !s) return s.error();
  return std::vector<TensorType>{{DType::f32, {}}};
}

std::int64_t flopsGlobalNorm(const OpContext& c, Types) {
  std::int64_t n = 0;
  for (const TensorType& t : c.inputs) n += 2 * t.numel();
  return n;
}

Results inferClipCoef(const OpContext& c) {
  if (Status s = requireScalar(c.inputs[0], "the norm"); !s) return s.error();
  if (!(*getFloat(c.attrs, "max_norm") > 0)) return fail("max_norm must be positive");
  return std::vector<TensorType>{c.inputs[0]};
}

Results inferLrSchedule(const OpContext& c) {
  if (Status s = requireScalar(c.inputs[0], "the step", false); !s) return s.error();
  if (*getInt(c.attrs, "warmup_steps") < 0 || *getInt(c.attrs, "total_steps") < 1)
    return fail("warmup_steps must be >= 0 and total_steps >= 1");
  return std::vector<TensorType>{{DType::f32, {}}};
}

Status checkParamAndGrad(const OpContext& c) {
  if (Status s = requireFloat(c.inputs[0], "the parameter"); !s) return s;
  return sameType(c.inputs[0], c.inputs[1], "the parameter and its gradient");
}

Results inferSgdStep(const OpContext& c) {
  if (Status s = checkParamAndGrad(c); !s) return s.error();
  if (Status s = requireScalar(c.inputs[2], "the learning rate"); !s) return s.error();
  if (Status s = requireScalar(c.inputs[3], "the gradient scale"); !s) return s.error();
  bool momentum = *getFloat(c.attrs, "momentum") != 0.0;
  if (momentum != (c.inputs.size() == 5))
    return fail(momentum ? "momentum needs a momentum buffer operand" : "a momentum buffer without momentum");
  if (c.inputs.size() == 5)
    if (Status s = sameType(c.inputs[0], c.inputs[4], "the parameter and its momentum buffer"); !s)
      return s.error();
  return std::vector<TensorType>{};
}

Results inferAdamwStep(const OpContext& c) {
  if (Status s = checkParamAndGrad(c); !s) return s.error();
  for (size_t i : {2, 3})
    if (Status s = sameType(c.inputs[0], c.inputs[i], "the parameter and its moment"); !s) return s.error();
  if (Status s = requireScalar(c.inputs[4], "the learning rate"); !s) return s.error();
  if (Status s = requireScalar(c.inputs[5], "the step", false); !s) return s.error();
  if (Status s = requireScalar(c.inputs[6], "the gradient scale"); !s) return s.error();
  return std::vector<TensorType>{};
}

std::int64_t flopsSgdStep(const OpContext& c, Types) { return 4 * c.inputs[0].numel(); }
std::int64_t flopsAdamwStep(const OpContext& c, Types) { return 12 * c.inputs[0].numel(); }

}  // namespace

std::vector<OpInfo> trainingOps() {
  const AttrSpec dimAttr{"dim", AttrKind::Int, true, "the axis"};
  return {
      {.name = "sum_to", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"shape", AttrKind::IntList, true, "target shape; x's shape must be a broadcast of it"}},
       .infer = inferSumTo, .flops = flopsPerFirstInput,
       .stridedReads = StridedReads::InPlace,
       .summary = "sum x over the axes that broadcasting expanded, down to shape (gradient of broadcasting)"},
      {.name = "relu_backward", .minInputs = 2, .maxInputs = 2, .infer = inferGradLikeSaved,
       .flops = perResultElement<1>, .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "grad * (y > 0); operands (grad, y)"},
      {.name = "gelu_backward", .minInputs = 2, .maxInputs = 2,
       .attrs = {{"approximate", AttrKind::String, false, "as in the forward gelu"}}, .infer = inferGeluBackward,
       .flops = perResultElement<12>, .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "grad * gelu'(x); operands (grad, x)"},
      {.name = "tanh_backward", .minInputs = 2, .maxInputs = 2, .infer = inferGradLikeSaved,
       .flops = perResultElement<3>, .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "grad * (1 - y^2); operands (grad, y)"},
      {.name = "sigmoid_backward", .minInputs = 2, .maxInputs = 2, .infer = inferGradLikeSaved,
       .flops = perResultElement<3>, .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "grad * y * (1 - y); operands (grad, y)"},
      {.name = "softmax_backward", .minInputs = 2, .maxInputs = 2, .attrs = {dimAttr}, .infer = inferSoftmaxBackward,
       .flops = perResultElement<4>, .summary = "y * (grad - sum(grad * y, dim)); operands (grad, y)"},
      {.name = "log_softmax_backward", .minInputs = 2, .maxInputs = 2, .attrs = {dimAttr},
       .infer = inferSoftmaxBackward, .flops = perResultElement<4>,
       .summary = "grad - exp(y) * sum(grad, dim); operands (grad, y)"},
      {.name = "layer_norm_backward", .minInputs = 6, .maxInputs = 6, .infer = inferLayerNormBackward,
       .flops = flopsLayerNormBackward, .workspaceBytes = workspaceLayerNormBackward,
       .summary = "(grad, x, mean, rstd, weight, bias) -> (grad_x, grad_weight, grad_bias)"},
      {.name = "causal_mask_backward", .minInputs = 1, .maxInputs = 1, .infer = inferUnaryFloat, .flops = noFlops,
       .workspaceBytes = workspaceCausalMaskBackward,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "grad with the masked (j > i) positions zeroed"},
      {.name = "slice_backward", .minInputs = 1, .maxInputs = 1,
       .attrs = {dimAttr, {"start", AttrKind::Int, true, "as in the forward slice"},
                 {"end", AttrKind::Int, true, "as in the forward slice"},
                 {"input_shape", AttrKind::IntList, true, "shape of the sliced tensor"}},
       .infer = inferSliceBackward, .flops = noFlops, .stridedReads = StridedReads::InPlace,
       .summary = "zeros of input_shape with grad placed at the slice"},
      {.name = "select_backward", .minInputs = 1, .maxInputs = 1,
       .attrs = {dimAttr, {"index", AttrKind::Int, true, "as in the forward select"},
                 {"input_shape", AttrKind::IntList, true, "shape of the indexed tensor"}},
       .infer = inferSelectBackward, .flops = noFlops, .stridedReads = StridedReads::InPlace,
       .summary = "zeros of input_shape with grad placed at index"},
      {.name = "concat", .minInputs = 1, .maxInputs = kVariadic, .attrs = {dimAttr}, .infer = inferConcat,
       .flops = noFlops, .stridedReads = StridedReads::InPlace,
       .summary = "operands joined along an existing axis (gradient of split)"},
      {.name = "embedding_backward", .minInputs = 2, .maxInputs = 2,
       .attrs = {{"num", AttrKind::Int, true, "rows of the embedding table"}}, .infer = inferEmbeddingBackward,
       .flops = flopsEmbeddingBackward, .indexBound = embeddingBackwardRows, .summary = "(grad, indices) -> grad of the table [num, dim], rows summed"},
      {.name = "cross_entropy_backward", .minInputs = 3, .maxInputs = 3,
       .attrs = {{"ignore_index", AttrKind::Int, false, "as the forward's: those rows get a zero gradient"},
                 {"label_smoothing", AttrKind::Float, false, "as the forward's"}},
       .infer = inferCrossEntropyBackward,
       .flops = flopsCrossEntropyBackward, .workspaceBytes = workspaceCrossEntropyBackward,
       .indexBound = crossEntropyBackwardClasses,
       .summary = "(grad, logits, target) -> grad * (softmax(logits) - onehot(target)) / count"},
      {.name = "mse_backward", .minInputs = 3, .maxInputs = 3, .infer = inferMseBackward,
       .flops = perResultElement<3>, .summary = "(grad, input, target) -> grad * 2 (input - target) / count"},
      {.name = "linear_weight_grad", .minInputs = 2, .maxInputs = 2, .infer = inferLinearWeightGrad,
       .flops = flopsLinearWeightGrad,
       .stridedReads = StridedReads::Rows,
       .summary = "(grad_out[..., out], x[..., in]) -> sum over leading dims of grad_out^T x: [out, in]"},
      {.name = "full", .minInputs = 0, .maxInputs = 0,
       .attrs = {{"shape", AttrKind::IntList, true, "extents"}, {"dtype", AttrKind::DType, true, "element type"},
                 {"value", AttrKind::Float, true, "the fill value"}},
       .infer = inferFull, .flops = noFlops, .stridedReads = StridedReads::InPlace,
       .summary = "a tensor filled with value"},
      {.name = "global_norm", .minInputs = 1, .maxInputs = kVariadic,
       .attrs = {{"squared", AttrKind::Bool, false,
                  "the sum of squares itself, without the root (a rank's part of a sharded norm)"}},
       .infer = inferGlobalNorm,
       .flops = flopsGlobalNorm, .workspaceBytes = workspaceGlobalNorm, .stridedReads = StridedReads::InPlace,
       .role = OpRole::GradientNorm,
       .summary = "sqrt of the sum of squares of every operand: f32[]"},
      {.name = "clip_coef", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"max_norm", AttrKind::Float, true, "largest gradient norm allowed"}}, .infer = inferClipCoef,
       .flops = noFlops, .workspaceBytes = workspaceClipCoef, .stridedReads = StridedReads::InPlace,
       .summary = "min(1, max_norm / (norm + 1e-6)): the gradient scale of norm clipping"},
      {.name = "lr_schedule", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"lr", AttrKind::Float, true, "peak learning rate"},
                 {"min_lr", AttrKind::Float, true, "floor of the cosine decay"},
                 {"warmup_steps", AttrKind::Int, true, "linear warmup length"},
                 {"total_steps", AttrKind::Int, true, "steps of warmup + cosine decay"}},
       .infer = inferLrSchedule, .flops = noFlops,
       .stridedReads = StridedReads::InPlace,
       .summary = "learning rate at a 1-based step: linear warmup, then cosine decay to min_lr"},
      {.name = "sgd_step", .minInputs = 4, .maxInputs = 5,
       .attrs = {{"momentum", AttrKind::Float, true, "0 for plain SGD"},
                 {"weight_decay", AttrKind::Float, true, "L2 penalty added to the gradient"}},
       .infer = inferSgdStep, .flops = flopsSgdStep, .workspaceBytes = workspaceSgdStep, .sideEffects = true,
       .stridedReads = StridedReads::InPlace,
       .role = OpRole::OptimizerUpdate, .stateBegin = 4, .stateEnd = 5, .shardedForm = "sgd_shard_step",
       .summary = "(param, grad, lr, grad_scale[, momentum_buf]): PyTorch SGD update, in place"},
      {.name = "adamw_step", .minInputs = 7, .maxInputs = 7,
       .attrs = {{"beta1", AttrKind::Float, true, "first-moment decay"},
                 {"beta2", AttrKind::Float, true, "second-moment decay"},
                 {"eps", AttrKind::Float, true, "added to the root of the second moment"},
                 {"weight_decay", AttrKind::Float, true, "decoupled decay, scaled by lr"},
                 {"fused", AttrKind::Bool, false,
                  "one pass over param, grad and moments (set by the fuse pass; default: PyTorch's op-by-op update)"}},
       .infer = inferAdamwStep, .flops = flopsAdamwStep, .workspaceBytes = workspaceAdamwStep, .sideEffects = true,
       .stridedReads = StridedReads::InPlace,
       .role = OpRole::OptimizerUpdate, .stateBegin = 2, .stateEnd = 4, .shardedForm = "adamw_shard_step",
       .summary = "(param, grad, m, v, lr, step, grad_scale): PyTorch AdamW update, in place"},
  };
}

}  // namespace gradc::ir
