// The op table's fused LM-head loss: linear_cross_entropy and its backward.
//
// cross_entropy(linear(x, w, b), target) computed over the N = numel(target) rows of x in
// chunks of c = ceil(N / chunks) rows, so that only one chunk of logits [c, V] ever exists
// (never [N, V]). Forward: per chunk the logits, their log-sum-exp (kept for backward: the
// `lse` result, one value per row) and the picked target logits; loss = mean(lse - picked).
// Backward: per chunk the logits are computed again, softmax = exp(logits - lse) in place,
// minus one at the targets, times grad / N; that chunk's rows of grad_x (= chunk @ w) and its
// contribution to grad_w (+= chunk^T @ x_chunk) and grad_b follow. The recomputed logits cost
// one more logits matmul per step (fusedLossRecomputeFlops), which the planner counts as
// recompute when it chooses whether and how finely to chunk (passes/fuse_loss.h).
//
// Workspace (runtime/kernels_fused_loss.cpp allocates exactly these, all alive at once at the
// kernel's peak): the chunk of logits, per-row columns of the chunk, the target as i64 when it
// is i32, and the 0-dim scalars ATen wraps.
#include <string>

#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

const AttrSpec kChunksAttr{"chunks", AttrKind::Int, true,
                           "token chunks: the rows are processed ceil(rows / chunks) at a time"};

struct Dims {
  std::int64_t rows, classes, features, elementBytes;
  std::int64_t chunkRows;
  bool wideTarget;  // the target is i32 and is widened to i64 once
};

// Operands of the forward op start (x, w, target[, bias]); the backward op has its gradient in
// front, so `first` is the position of x.
Dims dimsOf(const OpContext& c, size_t first) {
  const TensorType& x = c.inputs[first];
  const TensorType& w = c.inputs[first + 1];
  const TensorType& target = c.inputs[first + 2];
  Dims d{};
  d.rows = target.numel();
  d.classes = w.shape[0];
  d.features = w.shape[1];
  d.elementBytes = dtypeSize(x.dtype);
  d.chunkRows = linearCrossEntropyChunkRows(d.rows, *getInt(c.attrs, "chunks"));
  d.wideTarget = target.dtype != DType::i64;
  return d;
}

// Checks (x, w, target[, bias]) starting at operand `first`.
Status checkOperands(const OpContext& c, size_t first) {
  const TensorType& x = c.inputs[first];
  const TensorType& w = c.inputs[first + 1];
  const TensorType& target = c.inputs[first + 2];
  if (Status s = requireFloat(x, "the hidden states"); !s) return s;
  if (x.rank() < 1) return Error{"the hidden states must have a feature dimension, got " + typeStr(x)};
  if (w.rank() != 2 || w.dtype != x.dtype)
    return Error{"the weight must be [classes, features] of the hidden states' dtype, got " + typeStr(w) + " for " +
                 typeStr(x)};
  if (w.shape[1] != x.shape.back())
    return Error{"hidden features " + std::to_string(x.shape.back()) + " do not match the weight " + typeStr(w)};
  if (!isInteger(target.dtype))
    return Error{"the target must hold class indices (i64 or i32), got " + typeStr(target)};
  Shape expected(x.shape.begin(), x.shape.end() - 1);
  if (target.shape != expected)
    return Error{"the target must have the hidden states' shape without the feature dimension: " + typeStr(x) +
                 " needs target " + shapeToString(expected) + ", got " + typeStr(target)};
  if (c.inputs.size() > first + 3) {
    const TensorType& b = c.inputs[first + 3];
    if (b.dtype != x.dtype || b.shape != Shape{w.shape[0]})
      return Error{"the bias must be " + typeStr({x.dtype, {w.shape[0]}}) + ", got " + typeStr(b)};
  }
  if (*getInt(c.attrs, "chunks") < 1)
    return Error{"chunks must be at least 1, got " + std::to_string(*getInt(c.attrs, "chunks"))};
  return {};
}

Results inferLinearCrossEntropy(const OpContext& c) {
  if (Status s = checkOperands(c, 0); !s) return Error{s.message()};
  const DType dtype = c.inputs[0].dtype;
  return std::vector<TensorType>{{dtype, {}}, {dtype, c.inputs[2].shape}};
}

Results inferLinearCrossEntropyBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  if (g.rank() != 0 || !isFloating(g.dtype)) return fail("the gradient must be a float scalar, got " + typeStr(g));
  std::vector<TensorType> forward{c.inputs[1], c.inputs[2], c.inputs[3]};
  if (c.inputs.size() > 5) forward.push_back(c.inputs[5]);
  if (Status s = checkOperands(OpContext{forward, c.attrs}, 0); !s) return Error{s.message()};
  const TensorType& lse = c.inputs[4];
  if (lse != TensorType{c.inputs[1].dtype, c.inputs[3].shape})
    return fail("the saved log-sum-exp must be " + typeStr({c.inputs[1].dtype, c.inputs[3].shape}) + ", got " +
                typeStr(lse));
  std::vector<TensorType> out{c.inputs[1], c.inputs[2]};
  if (c.inputs.size() > 5) out.push_back(c.inputs[5]);
  return out;
}

std::optional<std::int64_t> forwardClasses(const OpContext& c, size_t operand) {
  if (operand != 2) return std::nullopt;
  return c.inputs[1].shape[0];
}
std::optional<std::int64_t> backwardClasses(const OpContext& c, size_t operand) {
  if (operand != 3) return std::nullopt;
  return c.inputs[2].shape[0];
}

std::int64_t logitsFlops(const Dims& d, bool bias) {
  std::int64_t mm = saturatingMul(saturatingMul(2, d.rows), saturatingMul(d.classes, d.features));
  return bias ? saturatingAdd(mm, saturatingMul(d.rows, d.classes)) : mm;
}

// The logits, then max, subtract, exp and sum per row (4 per logit).
std::int64_t flopsForward(const OpContext& c, Types) {
  Dims d = dimsOf(c, 0);
  return saturatingAdd(logitsFlops(d, c.inputs.size() > 3), saturatingMul(4, saturatingMul(d.rows, d.classes)));
}

// The logits again, subtract, exp and scale (3 per logit), grad_x and grad_w (two matmuls of
// the logits' size), grad_b (a matrix-vector product).
std::int64_t flopsBackward(const OpContext& c, Types) {
  Dims d = dimsOf(c, 1);
  const bool bias = c.inputs.size() > 5;
  std::int64_t logits = saturatingMul(d.rows, d.classes);
  std::int64_t mm = saturatingMul(2, saturatingMul(logits, d.features));
  std::int64_t total = saturatingAdd(logitsFlops(d, bias), saturatingMul(3, logits));
  total = saturatingAdd(total, saturatingMul(2, mm));
  return bias ? saturatingAdd(total, saturatingMul(2, logits)) : total;
}

// logits [c, V]; row max and row sum [c, 1]; the picked target logits [N, 1]; the i64 target
// when it is i32; at the end, the mean's divisor as ATen wraps a Scalar.
std::int64_t workspaceForward(const OpContext& c, Types) {
  Dims d = dimsOf(c, 0);
  std::int64_t total = (d.chunkRows * d.classes + 2 * d.chunkRows + d.rows) * d.elementBytes +
                       scalarOperandBytes(c.inputs[0].dtype);
  if (d.wideTarget) total += d.rows * 8;
  return total;
}

// logits [c, V]; a [c, 1] column of -1 (added at the targets); with a bias, a [c] vector of
// ones (grad_b = chunk^T @ ones); the 0-dim factor grad / N and, while it is computed, its
// wrapped divisor; the i64 target when it is i32.
std::int64_t workspaceBackward(const OpContext& c, Types) {
  Dims d = dimsOf(c, 1);
  const bool bias = c.inputs.size() > 5;
  std::int64_t total = (d.chunkRows * d.classes + d.chunkRows * (bias ? 2 : 1) + 1) * d.elementBytes +
                       scalarOperandBytes(c.inputs[1].dtype);
  if (d.wideTarget) total += d.rows * 8;
  return total;
}

}  // namespace

std::int64_t linearCrossEntropyChunkRows(std::int64_t rows, std::int64_t chunks) {
  if (chunks < 1) chunks = 1;
  return rows <= 0 ? 0 : (rows + chunks - 1) / chunks;
}

std::int64_t fusedLossRecomputeFlops(std::span<const TensorType> backwardOperands) {
  const AttrMap attrs{{"chunks", std::int64_t{1}}};
  return logitsFlops(dimsOf(OpContext{backwardOperands, attrs}, 1), backwardOperands.size() > 5);
}

std::vector<OpInfo> fusedLossOps() {
  return {
      {.name = "linear_cross_entropy", .minInputs = 3, .maxInputs = 4, .attrs = {kChunksAttr},
       .infer = inferLinearCrossEntropy, .flops = flopsForward, .workspaceBytes = workspaceForward,
       .indexBound = forwardClasses, .stridedReads = StridedReads::Rows,
       .summary = "(x[..., D], w[V, D], target[...][, bias[V]]) -> (cross_entropy(linear(x, w, bias), target), "
                  "lse[...]) in chunks of rows, never holding all the logits"},
      {.name = "linear_cross_entropy_backward", .minInputs = 5, .maxInputs = 6, .attrs = {kChunksAttr},
       .infer = inferLinearCrossEntropyBackward, .flops = flopsBackward, .workspaceBytes = workspaceBackward,
       .indexBound = backwardClasses, .stridedReads = StridedReads::Rows,
       .summary = "(grad, x, w, target, lse[, bias]) -> (grad_x, grad_w[, grad_bias]), recomputing the logits "
                  "chunk by chunk"},
  };
}

}  // namespace gradc::ir
