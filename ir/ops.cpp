// The op table. One entry per op; see ir/op_table.h for what an entry means.
//
// FLOP convention: a multiply-add is 2 FLOPs (matmul/linear: 2*M*N*K); elementwise ops count
// their per-element work with transcendentals as one FLOP each (e.g. sigmoid = exp + add +
// div = 3). Reductions (softmax, layer_norm, losses) count each pass over their input.
// Workspace: temporaries a kernel allocates beyond its results (e.g. cross_entropy's
// log-probabilities), so that the memory planner can account for them.
#include <algorithm>
#include <string>

#include "ir/op_rules.h"
#include "ir/op_table.h"
#include "ir/kernel_target.h"

namespace gradc::ir {
namespace {
using namespace rules;

Results inferSoftmax(const OpContext& c) {
  if (Status s = requireFloat(c.inputs[0], "the input"); !s) return s.error();
  std::int64_t dim = *getInt(c.attrs, "dim");
  if (!normalizeAxis(dim, c.inputs[0].rank()))
    return fail("dim " + std::to_string(dim) + " is out of range for " + typeStr(c.inputs[0]));
  return std::vector<TensorType>{c.inputs[0]};
}

// ---- individual ops ----------------------------------------------------------------------------

Results inferEmbedding(const OpContext& c) {
  const TensorType& w = c.inputs[0];
  const TensorType& idx = c.inputs[1];
  if (w.rank() != 2) return fail("the weight must be [num, dim], got " + typeStr(w));
  if (Status s = requireFloat(w, "the weight"); !s) return s.error();
  if (!isInteger(idx.dtype)) return fail("the indices must be i64 or i32, got " + typeStr(idx));
  if (idx.rank() + 1 > kMaxRank) return fail("indices of rank " + std::to_string(idx.rank()) + " are too deep");
  Shape shape = idx.shape;
  shape.push_back(w.shape[1]);
  return single({w.dtype, shape});
}

std::optional<std::int64_t> embeddingRows(const OpContext& c, size_t operand) {
  if (operand != 1) return std::nullopt;
  return c.inputs[0].shape[0];
}

Results inferScale(const OpContext& c) { return inferUnaryFloat(c); }

Results inferMatmul(const OpContext& c) {
  const TensorType& a = c.inputs[0];
  const TensorType& b = c.inputs[1];
  if (a.dtype != b.dtype) return fail("operand dtypes differ: " + typeStr(a) + " and " + typeStr(b));
  if (Status s = requireFloat(a, "operands"); !s) return s.error();
  if (a.rank() < 2 || b.rank() < 2) return fail("operands must have rank >= 2, got " + typeStr(a) + " @ " + typeStr(b));
  std::int64_t m = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1];
  std::int64_t k2 = b.shape[b.rank() - 2], n = b.shape[b.rank() - 1];
  if (k != k2)
    return fail("inner dimensions differ: " + typeStr(a) + " @ " + typeStr(b) + " (" + std::to_string(k) + " vs " +
                std::to_string(k2) + ")");
  Shape batchA(a.shape.begin(), a.shape.end() - 2), batchB(b.shape.begin(), b.shape.end() - 2);
  std::optional<Shape> batch = broadcastShapes(batchA, batchB);
  if (!batch) return fail("batch dimensions of " + typeStr(a) + " and " + typeStr(b) + " do not broadcast");
  Shape out = *batch;
  out.push_back(m);
  out.push_back(n);
  return single({a.dtype, out});
}

std::int64_t flopsMatmul(const OpContext& c, std::span<const TensorType> r) {
  std::int64_t k = c.inputs[0].shape.back();
  return saturatingMul(saturatingMul(2, r[0].numel()), k);
}

Results inferLinear(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  const TensorType& w = c.inputs[1];
  if (x.dtype != w.dtype) return fail("input and weight dtypes differ: " + typeStr(x) + " and " + typeStr(w));
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  if (x.rank() < 1) return fail("the input must have rank >= 1, got " + typeStr(x));
  if (w.rank() != 2) return fail("the weight must be [out, in], got " + typeStr(w));
  if (x.shape.back() != w.shape[1])
    return fail("input features " + std::to_string(x.shape.back()) + " do not match the weight " + typeStr(w) +
                " (input " + typeStr(x) + ")");
  if (c.inputs.size() == 3) {
    const TensorType& b = c.inputs[2];
    if (b.dtype != w.dtype || b.shape != Shape{w.shape[0]})
      return fail("the bias must be " + std::string(dtypeName(w.dtype)) + "[" + std::to_string(w.shape[0]) +
                  "], got " + typeStr(b));
  }
  Shape out = x.shape;
  out.back() = w.shape[0];
  return single({x.dtype, out});
}

std::int64_t flopsLinear(const OpContext& c, std::span<const TensorType> r) {
  std::int64_t in = c.inputs[1].shape[1];
  return saturatingAdd(saturatingMul(saturatingMul(2, r[0].numel()), in), c.inputs.size() == 3 ? r[0].numel() : 0);
}

Results inferGelu(const OpContext& c) {
  if (auto a = getString(c.attrs, "approximate"); a && *a != "none" && *a != "tanh")
    return fail("approximate must be \"none\" or \"tanh\", got \"" + *a + "\"");
  return inferUnaryFloat(c);
}

Results inferLayerNorm(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  if (x.rank() < 1) return fail("the input must have rank >= 1");
  Shape param{x.shape.back()};
  for (size_t i = 1; i < 3; ++i)
    if (c.inputs[i].dtype != x.dtype || c.inputs[i].shape != param)
      return fail(std::string(i == 1 ? "the weight" : "the bias") + " must be " + std::string(dtypeName(x.dtype)) +
                  shapeToString(param) + ", got " + typeStr(c.inputs[i]));
  if (*getFloat(c.attrs, "eps") <= 0) return fail("eps must be positive");
  Shape stats = x.shape;
  stats.back() = 1;
  // Results: normalised output, per-row mean and reciprocal standard deviation (saved for
  // the backward kernel, as ATen's native_layer_norm returns them).
  return std::vector<TensorType>{x, {x.dtype, stats}, {x.dtype, stats}};
}

Results inferDropout(const OpContext& c) {
  double p = *getFloat(c.attrs, "p");
  if (!(p >= 0.0 && p < 1.0)) return fail("p must be in [0, 1), got " + std::to_string(p));
  return inferUnaryFloat(c);
}

Results inferCausalMask(const OpContext& c) {
  if (c.inputs[0].rank() < 2) return fail("the input must have rank >= 2, got " + typeStr(c.inputs[0]));
  return inferUnaryFloat(c);
}

// The [s, t] boolean mask of positions above the diagonal.
std::int64_t workspaceCausalMask(const OpContext& c, std::span<const TensorType>) {
  const Shape& s = c.inputs[0].shape;
  return s[s.size() - 2] * s[s.size() - 1];
}

Results inferReshape(const OpContext& c) {
  std::vector<std::int64_t> shape = *getIntList(c.attrs, "shape");
  std::optional<std::int64_t> n = checkedNumel(shape);
  if (!n) return fail("shape " + shapeToString(shape) + " must have positive extents");
  if (*n != c.inputs[0].numel())
    return fail("cannot reshape " + typeStr(c.inputs[0]) + " (" + std::to_string(c.inputs[0].numel()) +
                " elements) to " + shapeToString(shape) + " (" + std::to_string(*n) + " elements)");
  return single({c.inputs[0].dtype, shape});
}

Results inferTranspose(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  auto d0 = normalizeAxis(*getInt(c.attrs, "dim0"), x.rank());
  auto d1 = normalizeAxis(*getInt(c.attrs, "dim1"), x.rank());
  if (!d0 || !d1) return fail("transpose dims are out of range for " + typeStr(x));
  Shape out = x.shape;
  std::swap(out[*d0], out[*d1]);
  return single({x.dtype, out});
}

Results inferSlice(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), x.rank());
  if (!dim) return fail("dim is out of range for " + typeStr(x));
  std::int64_t start = *getInt(c.attrs, "start"), end = *getInt(c.attrs, "end");
  if (start < 0 || end > x.shape[*dim] || start >= end)
    return fail("slice [" + std::to_string(start) + ", " + std::to_string(end) + ") is empty or out of range for " +
                "extent " + std::to_string(x.shape[*dim]) + " of " + typeStr(x));
  Shape out = x.shape;
  out[*dim] = end - start;
  return single({x.dtype, out});
}

Results inferSelect(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), x.rank());
  if (!dim) return fail("dim is out of range for " + typeStr(x));
  std::int64_t index = *getInt(c.attrs, "index");
  if (index < 0 || index >= x.shape[*dim])
    return fail("index " + std::to_string(index) + " is out of range for extent " + std::to_string(x.shape[*dim]) +
                " of " + typeStr(x));
  Shape out = x.shape;
  out.erase(out.begin() + *dim);
  return std::vector<TensorType>{{x.dtype, out}};
}

Results inferSplit(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), x.rank());
  if (!dim) return fail("dim is out of range for " + typeStr(x));
  std::int64_t sections = *getInt(c.attrs, "sections");
  if (sections < 1 || sections > 1024) return fail("sections must be in [1, 1024], got " + std::to_string(sections));
  if (x.shape[*dim] % sections != 0)
    return fail("extent " + std::to_string(x.shape[*dim]) + " of " + typeStr(x) + " does not split into " +
                std::to_string(sections) + " equal parts");
  Shape part = x.shape;
  part[*dim] /= sections;
  return std::vector<TensorType>(static_cast<size_t>(sections), TensorType{x.dtype, part});
}

Results inferUnbind(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), x.rank());
  if (!dim) return fail("dim is out of range for " + typeStr(x));
  if (x.shape[*dim] > (1 << 20))
    return fail("unbinding " + std::to_string(x.shape[*dim]) + " results exceeds the limit of 1048576");
  Shape part = x.shape;
  part.erase(part.begin() + *dim);
  return std::vector<TensorType>(static_cast<size_t>(x.shape[*dim]), TensorType{x.dtype, part});
}

Results inferStack(const OpContext& c) {
  if (c.inputs.empty()) return fail("needs at least one operand");
  const TensorType& first = c.inputs[0];
  for (size_t i = 1; i < c.inputs.size(); ++i)
    if (c.inputs[i] != first)
      return fail("operand " + std::to_string(i) + " is " + typeStr(c.inputs[i]) + ", expected " + typeStr(first));
  auto dim = normalizeAxis(*getInt(c.attrs, "dim"), first.rank() + 1);
  if (!dim) return fail("dim is out of range for stacking " + typeStr(first));
  Shape out = first.shape;
  out.insert(out.begin() + *dim, static_cast<std::int64_t>(c.inputs.size()));
  return single({first.dtype, out});
}

Results inferZeros(const OpContext& c) {
  std::vector<std::int64_t> shape = *getIntList(c.attrs, "shape");
  if (!checkedNumel(shape)) return fail("shape " + shapeToString(shape) + " must have positive extents");
  return single({*getDType(c.attrs, "dtype"), shape});
}

Results inferCrossEntropy(const OpContext& c) {
  const TensorType& logits = c.inputs[0];
  const TensorType& target = c.inputs[1];
  if (Status s = requireFloat(logits, "the logits"); !s) return s.error();
  if (logits.rank() < 1) return fail("the logits must have a class dimension, got " + typeStr(logits));
  if (!isInteger(target.dtype)) return fail("the target must hold class indices (i64 or i32), got " + typeStr(target));
  Shape expected(logits.shape.begin(), logits.shape.end() - 1);
  if (target.shape != expected)
    return fail("the target shape must be the logits shape without the class dimension: logits " + typeStr(logits) +
                " needs target " + shapeToString(expected) + ", got " + typeStr(target));
  if (std::optional<double> eps = getFloat(c.attrs, "label_smoothing"); eps && !(*eps >= 0 && *eps < 1))
    return fail("label_smoothing must be in [0, 1), got " + std::to_string(*eps));
  return std::vector<TensorType>{{logits.dtype, {}}};
}

// log_softmax (max, sub, exp, sum, log, sub) then a gather and a mean.
std::int64_t flopsCrossEntropy(const OpContext& c, std::span<const TensorType>) { return 5 * c.inputs[0].numel(); }
// The log-probabilities the kernel materialises (ATen's cross_entropy = log_softmax + nll_loss).
std::optional<std::int64_t> crossEntropyClasses(const OpContext& c, size_t operand) {
  if (operand != 1) return std::nullopt;
  return c.inputs[0].shape.back();
}

// The [N, C] log-probabilities and nll_loss's 0-dim total weight (with label smoothing the
// kernel sums the log-probabilities itself: no total weight). An i32 target is widened to i64.
std::int64_t workspaceCrossEntropy(const OpContext& c, std::span<const TensorType>) {
  const std::int64_t widened = c.inputs[1].dtype == DType::i32 ? c.inputs[1].numel() * 8 : 0;
  if (getFloat(c.attrs, "label_smoothing").value_or(0.0) > 0) return c.inputs[0].bytes() + widened;
  return c.inputs[0].bytes() + dtypeSize(c.inputs[0].dtype) + widened;
}

// The squared differences, before their mean (a sum divided by a Scalar count).
std::int64_t workspaceMse(const OpContext& c, std::span<const TensorType>) {
  return c.inputs[0].bytes() + scalarOperandBytes(c.inputs[0].dtype);
}

// The factor, as ATen wraps a Scalar.
std::int64_t workspaceScale(const OpContext& c, std::span<const TensorType>) {
  return scalarOperandBytes(c.inputs[0].dtype);
}

Results inferMse(const OpContext& c) {
  const TensorType& a = c.inputs[0];
  const TensorType& b = c.inputs[1];
  if (Status s = requireFloat(a, "the input"); !s) return s.error();
  if (a != b) return fail("input and target must have the same type, got " + typeStr(a) + " and " + typeStr(b));
  return std::vector<TensorType>{{a.dtype, {}}};
}

std::int64_t flopsMse(const OpContext& c, std::span<const TensorType>) { return 3 * c.inputs[0].numel(); }
std::int64_t flopsSoftmax(const OpContext& c, std::span<const TensorType>) { return 5 * c.inputs[0].numel(); }
std::int64_t flopsLayerNorm(const OpContext& c, std::span<const TensorType>) { return 8 * c.inputs[0].numel(); }

// ---- the table ---------------------------------------------------------------------------------

}  // namespace

std::vector<OpInfo> forwardOps() {
  return {
      {.name = "embedding", .minInputs = 2, .maxInputs = 2, .infer = inferEmbedding, .flops = noFlops,
       .indexBound = embeddingRows,
       .summary = "rows of weight[num, dim] selected by integer indices[...] -> [..., dim]"},
      {.name = "add", .minInputs = 2, .maxInputs = 2, .infer = inferBinaryBroadcast, .flops = perResultElement<1>,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "a + b with broadcasting"},
      {.name = "sub", .minInputs = 2, .maxInputs = 2, .infer = inferBinaryBroadcast, .flops = perResultElement<1>,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "a - b with broadcasting"},
      {.name = "mul", .minInputs = 2, .maxInputs = 2, .infer = inferBinaryBroadcast, .flops = perResultElement<1>,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "a * b with broadcasting"},
      {.name = "scale", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"factor", AttrKind::Float, true, "the constant multiplier"}}, .infer = inferScale,
       .flops = perResultElement<1>, .workspaceBytes = workspaceScale, .elementwise = true,
       .stridedReads = StridedReads::InPlace, .role = OpRole::ConstantScale,
       .summary = "x * factor"},
      {.name = "matmul", .minInputs = 2, .maxInputs = 2, .infer = inferMatmul, .flops = flopsMatmul,
       .stridedReads = StridedReads::Matmul, .role = OpRole::MatrixProduct,
       .summary = "batched matrix product [..., m, k] @ [..., k, n] -> [..., m, n], batch dims broadcast"},
      {.name = "linear", .minInputs = 2, .maxInputs = 3, .infer = inferLinear, .flops = flopsLinear,
       .role = OpRole::LinearLayer,
       .summary = "x[..., in] @ weight[out, in]^T (+ bias[out]) -> [..., out]"},
      {.name = "relu", .minInputs = 1, .maxInputs = 1, .infer = inferUnaryFloat, .flops = perResultElement<1>,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "max(x, 0)"},
      {.name = "gelu", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"approximate", AttrKind::String, false, "\"none\" (erf, default) or \"tanh\""}},
       .infer = inferGelu, .flops = perResultElement<8>, .elementwise = true,
       .stridedReads = StridedReads::InPlace,
       .summary = "x * Phi(x), exact or tanh-approximated"},
      {.name = "tanh", .minInputs = 1, .maxInputs = 1, .infer = inferUnaryFloat, .flops = perResultElement<1>,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "tanh(x)"},
      {.name = "sigmoid", .minInputs = 1, .maxInputs = 1, .infer = inferUnaryFloat, .flops = perResultElement<3>,
       .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "1 / (1 + exp(-x))"},
      {.name = "softmax", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim", AttrKind::Int, true, "the normalised axis"}}, .infer = inferSoftmax, .flops = flopsSoftmax,
       .role = OpRole::Softmax, .summary = "exp(x) / sum(exp(x)) along dim"},
      {.name = "log_softmax", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim", AttrKind::Int, true, "the normalised axis"}}, .infer = inferSoftmax, .flops = flopsSoftmax,
       .summary = "x - log(sum(exp(x))) along dim"},
      {.name = "layer_norm", .minInputs = 3, .maxInputs = 3,
       .attrs = {{"eps", AttrKind::Float, true, "added to the variance"}}, .infer = inferLayerNorm,
       .flops = flopsLayerNorm,
       .summary = "normalise over the last dim, then * weight + bias; results (y, mean, rstd)"},
      {.name = "dropout", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"p", AttrKind::Float, true, "probability of zeroing an element"},
                 {"rng", AttrKind::Int, true, "key of this node's random stream: (seed, step, rng)"},
                 {"rng_offset", AttrKind::Int, false,
                  "stream position of element 0 (default 0): a data-parallel shard draws its rows of the "
                  "full batch's mask"}},
       .infer = inferDropout, .flops = perResultElement<2>, .elementwise = true, .random = true,
       .evalIdentity = true,
       .summary = "zero elements with probability p, scale the rest by 1/(1-p)"},
      {.name = "causal_mask", .minInputs = 1, .maxInputs = 1, .infer = inferCausalMask, .flops = noFlops,
       .workspaceBytes = workspaceCausalMask,
       .elementwise = true, .stridedReads = StridedReads::InPlace, .role = OpRole::CausalMask,
       .summary = "set x[..., i, j] = -inf where j > i"},
      {.name = "reshape", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"shape", AttrKind::IntList, true, "the new extents (same element count)"}}, .infer = inferReshape,
       .flops = noFlops, .view = true, .viewLayout = ViewLayout::Reshape,
       .summary = "same elements, new shape (row-major)"},
      {.name = "transpose", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim0", AttrKind::Int, true, "first axis"}, {"dim1", AttrKind::Int, true, "second axis"}},
       .infer = inferTranspose, .flops = noFlops, .view = true, .viewLayout = ViewLayout::Transpose,
       .summary = "swap two axes"},
      {.name = "slice", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim", AttrKind::Int, true, "the sliced axis"},
                 {"start", AttrKind::Int, true, "first index kept"},
                 {"end", AttrKind::Int, true, "one past the last index kept"}},
       .infer = inferSlice, .flops = noFlops, .view = true, .viewLayout = ViewLayout::SameStrides,
       .summary = "x[..., start:end, ...] along dim"},
      {.name = "select", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim", AttrKind::Int, true, "the removed axis"}, {"index", AttrKind::Int, true, "the kept index"}},
       .infer = inferSelect, .flops = noFlops, .view = true,
       .viewLayout = ViewLayout::DropAxis,
       .summary = "x[..., index, ...] along dim; removes the axis"},
      {.name = "split", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim", AttrKind::Int, true, "the split axis"},
                 {"sections", AttrKind::Int, true, "number of equal parts (= number of results)"}},
       .infer = inferSplit, .flops = noFlops, .view = true, .viewLayout = ViewLayout::SameStrides,
       .summary = "equal parts along dim, one result each"},
      {.name = "unbind", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"dim", AttrKind::Int, true, "the axis taken apart"}}, .infer = inferUnbind, .flops = noFlops,
       .view = true, .viewLayout = ViewLayout::DropAxis,
       .summary = "one result per index along dim, each without that axis (the inverse of stack)"},
      {.name = "stack", .minInputs = 1, .maxInputs = kVariadic,
       .attrs = {{"dim", AttrKind::Int, true, "position of the new axis"}}, .infer = inferStack, .flops = noFlops,
       .stridedReads = StridedReads::InPlace,
       .summary = "operands of one type joined along a new axis"},
      {.name = "zeros", .minInputs = 0, .maxInputs = 0,
       .attrs = {{"shape", AttrKind::IntList, true, "extents"}, {"dtype", AttrKind::DType, true, "element type"}},
       .infer = inferZeros, .flops = noFlops, .stridedReads = StridedReads::InPlace,
       .summary = "a tensor of zeros"},
      {.name = "cross_entropy", .minInputs = 2, .maxInputs = 2,
       .attrs = {{"ignore_index", AttrKind::Int, false,
                  "rows whose target is this class count for nothing: the mean is over the other rows"},
                 {"label_smoothing", AttrKind::Float, false,
                  "eps in [0, 1): the target distribution is (1 - eps) onehot + eps / C"}},
       .infer = inferCrossEntropy,
       .flops = flopsCrossEntropy, .workspaceBytes = workspaceCrossEntropy, .indexBound = crossEntropyClasses,
       .role = OpRole::ClassificationLoss,
       .summary = "mean over targets (except ignore_index) of -log_softmax(logits)[target]; logits [..., C], target [...]"},
      {.name = "mse", .minInputs = 2, .maxInputs = 2, .infer = inferMse, .flops = flopsMse,
       .workspaceBytes = workspaceMse,
       .summary = "mean((input - target)^2)"},
  };
}

namespace {
using namespace rules;
const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> ops = [] {
    std::vector<OpInfo> all = forwardOps();
    for (OpInfo& op : trainingOps()) all.push_back(std::move(op));
    for (OpInfo& op : collectiveOps()) all.push_back(std::move(op));
    for (OpInfo& op : fusedLossOps()) all.push_back(std::move(op));
    for (OpInfo& op : transformerOps()) all.push_back(std::move(op));
    for (OpInfo& op : reductionOps()) all.push_back(std::move(op));
    for (OpInfo& op : fusedOps()) all.push_back(std::move(op));
    for (OpInfo& op : convOps()) all.push_back(std::move(op));
    for (OpInfo& op : batchNormOps()) all.push_back(std::move(op));
    for (OpInfo& op : attentionOps()) all.push_back(std::move(op));
    for (OpInfo& op : shardOps()) all.push_back(std::move(op));
    return all;
  }();
  return ops;
}
}  // namespace

std::int64_t scalarOperandBytes(DType dtype) { return 8 + (dtype == DType::f64 ? 0 : dtypeSize(dtype)); }

const OpInfo* findOp(std::string_view name) {
  for (const OpInfo& op : table())
    if (op.name == name) return &op;
  return nullptr;
}

std::span<const OpInfo> allOps() { return table(); }

const AttrSpec* findAttrSpec(const OpInfo& op, std::string_view name) {
  for (const AttrSpec& a : op.attrs)
    if (a.name == name) return &a;
  return nullptr;
}

Expected<std::vector<TensorType>> inferResultTypes(const OpInfo& op, std::span<const TensorType> inputs,
                                                   const AttrMap& attrs) {
  std::string where = std::string(op.name) + ": ";
  int n = static_cast<int>(inputs.size());
  if (n < op.minInputs || (op.maxInputs != kVariadic && n > op.maxInputs)) {
    std::string expected = op.minInputs == op.maxInputs ? std::to_string(op.minInputs)
                           : op.maxInputs == kVariadic  ? "at least " + std::to_string(op.minInputs)
                                                        : std::to_string(op.minInputs) + " to " +
                                                              std::to_string(op.maxInputs);
    return Error{where + "expects " + expected + " operand(s), got " + std::to_string(n)};
  }
  for (int i = 0; i < n; ++i)
    if (!checkedNumel(inputs[i].shape))
      return Error{where + "operand " + std::to_string(i) + " has an invalid shape " + shapeToString(inputs[i].shape)};
  for (const auto& [key, value] : attrs) {
    const AttrSpec* spec = findAttrSpec(op, key);
    if (!spec) return Error{where + "unknown attribute '" + key + "'"};
    if (kindOf(value) != spec->kind)
      return Error{where + "attribute '" + key + "' must be " + std::string(attrKindName(spec->kind)) + ", got " +
                   std::string(attrKindName(kindOf(value)))};
  }
  for (const AttrSpec& spec : op.attrs)
    if (spec.required && !attrs.count(spec.name))
      return Error{where + "missing attribute '" + std::string(spec.name) + "'"};
  Expected<std::vector<TensorType>> results = op.infer(OpContext{inputs, attrs});
  if (!results) return results.error().withContext(where);
  return results;
}

std::int64_t opFlops(const OpInfo& op, std::span<const TensorType> inputs, const AttrMap& attrs,
                     std::span<const TensorType> results) {
  return op.flops ? op.flops(OpContext{inputs, attrs}, results) : 0;
}

std::int64_t opWorkspaceBytes(const OpInfo& op, std::span<const TensorType> inputs, const AttrMap& attrs,
                              std::span<const TensorType> results, KernelSetting kernels) {
  const CostFn rule = workspaceRuleFor(op, kernels);
  return rule ? rule(OpContext{inputs, attrs, std::max(kernels.threads, 1)}, results) : 0;
}

std::int64_t opBytesAccessed(const OpInfo& op, std::span<const TensorType> inputs, const AttrMap& attrs,
                             std::span<const TensorType> results, KernelSetting kernels) {
  std::int64_t bytes = opWorkspaceBytes(op, inputs, attrs, results, kernels);
  for (const TensorType& t : inputs) bytes += t.bytes();
  for (const TensorType& t : results) bytes += t.bytes();
  return bytes;
}

}  // namespace gradc::ir
