// The op table's fused LM-head loss: linear_cross_entropy.
//
// cross_entropy(linear(x, w, b), target) and its gradients, computed over the N = numel(target)
// rows of x in chunks of c = ceil(N / chunks) rows, so that only one chunk of logits [c, V]
// ever exists (never [N, V], nor its gradient). Per chunk: the logits; their row maximum m and
// exp(logits - m) in place, whose row sum s gives softmax (divided in place) and the row's
// log-sum-exp log(s) + m, so the row's loss term lse - logits[target]; then softmax minus one at
// the targets, over N, is the chunk of d loss / d logits, from which the chunk's rows of grad_x
// (= chunk @ w) and its contributions to grad_w (+= chunk^T @ x_chunk) and grad_bias follow.
// loss = the mean of the row terms.
//
// The gradients are results of the forward op: they are the loss's gradients for an upstream
// gradient of 1, and the gradient rule scales them by the real one (passes/grad_rules.cpp). So
// the logits are computed once per step, as unfused (no recompute), and what a step keeps from
// the forward for the backward is grad_x [..., D] (in place of x) and grad_w [V, D] (which the
// backward would produce first anyway), never the logits.
//
// Workspace (runtime/kernels/kernels_fused_loss.cpp allocates exactly these, all alive at once at the
// kernel's peak): the chunk of logits, per-row columns of the chunk, the row loss terms, the
// factor 1 / N, the target as i64 when it is i32. The host's bf16 and f16 products take
// temporaries of their own beside them (its rule: runtime/host/host_workspace.h).
#include <string>

#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

struct Dims {
  std::int64_t rows, classes, features, elementBytes;
  std::int64_t chunkRows;
  bool bias;
  bool wideTarget;  // the target is i32 and is widened to i64 once
};

Dims dimsOf(const OpContext& c) {
  const TensorType& w = c.inputs[1];
  const TensorType& target = c.inputs[2];
  Dims d{};
  d.rows = target.numel();
  d.classes = w.shape[0];
  d.features = w.shape[1];
  d.elementBytes = dtypeSize(c.inputs[0].dtype);
  d.chunkRows = linearCrossEntropyChunkRows(d.rows, *getInt(c.attrs, "chunks"));
  d.bias = c.inputs.size() > 3;
  d.wideTarget = target.dtype != DType::i64;
  return d;
}

Results inferLinearCrossEntropy(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  const TensorType& w = c.inputs[1];
  const TensorType& target = c.inputs[2];
  if (Status s = requireFloat(x, "the hidden states"); !s) return s.error();
  if (x.rank() < 1) return fail("the hidden states must have a feature dimension, got " + typeStr(x));
  if (w.rank() != 2 || w.dtype != x.dtype)
    return fail("the weight must be [classes, features] of the hidden states' dtype, got " + typeStr(w) + " for " +
                typeStr(x));
  if (w.shape[1] != x.shape.back())
    return fail("hidden features " + std::to_string(x.shape.back()) + " do not match the weight " + typeStr(w));
  if (!isInteger(target.dtype)) return fail("the target must hold class indices (i64 or i32), got " + typeStr(target));
  Shape expected(x.shape.begin(), x.shape.end() - 1);
  if (target.shape != expected)
    return fail("the target must have the hidden states' shape without the feature dimension: " + typeStr(x) +
                " needs target " + shapeToString(expected) + ", got " + typeStr(target));
  std::vector<TensorType> out{{x.dtype, {}}, x, w};
  if (c.inputs.size() > 3) {
    const TensorType& b = c.inputs[3];
    if (b.dtype != x.dtype || b.shape != Shape{w.shape[0]})
      return fail("the bias must be " + typeStr({x.dtype, {w.shape[0]}}) + ", got " + typeStr(b));
    out.push_back(b);
  }
  if (*getInt(c.attrs, "chunks") < 1)
    return fail("chunks must be at least 1, got " + std::to_string(*getInt(c.attrs, "chunks")));
  return out;
}

std::optional<std::int64_t> targetClasses(const OpContext& c, size_t operand) {
  if (operand != 2) return std::nullopt;
  return c.inputs[1].shape[0];
}

// Per logit: the logits' and the two gradients' multiply-adds (2 D each), with a bias its add
// and its gradient's (3), and max, subtract, exp, sum, divide and scale (6).
std::int64_t flopsLinearCrossEntropy(const OpContext& c, Types) {
  Dims d = dimsOf(c);
  const std::int64_t logits = saturatingMul(d.rows, d.classes);
  const std::int64_t perLogit = 6 * d.features + 6 + (d.bias ? 3 : 0);
  return saturatingMul(logits, perLogit);
}

// logits [c, V]; row max, row sum and the -1 column [c, 1]; with a bias, ones [c]; the row loss
// terms [N, 1]; the 0-dim factor 1 / N; the i64 target when it is i32.
std::int64_t workspaceLinearCrossEntropy(const OpContext& c, Types) {
  Dims d = dimsOf(c);
  std::int64_t elements = d.chunkRows * d.classes + d.chunkRows * (d.bias ? 4 : 3) + d.rows + 1;
  std::int64_t total = saturatingMul(elements, d.elementBytes);
  if (d.wideTarget) total = saturatingAdd(total, saturatingMul(d.rows, 8));
  return total;
}

}  // namespace

std::int64_t linearCrossEntropyChunkRows(std::int64_t rows, std::int64_t chunks) {
  if (chunks < 1) chunks = 1;
  return rows <= 0 ? 0 : (rows + chunks - 1) / chunks;
}

std::vector<OpInfo> fusedLossOps() {
  return {
      {.name = "linear_cross_entropy", .minInputs = 3, .maxInputs = 4,
       .attrs = {{"chunks", AttrKind::Int, true, "token chunks: the rows are processed ceil(rows / chunks) at a time"}},
       .infer = inferLinearCrossEntropy, .flops = flopsLinearCrossEntropy,
       .workspaceBytes = workspaceLinearCrossEntropy, .indexBound = targetClasses, .stridedReads = StridedReads::Rows,
       .role = OpRole::FusedLinearLoss,
       .summary = "(x[..., D], w[V, D], target[...][, bias[V]]) -> (cross_entropy(linear(x, w, bias), target), its "
                  "gradients for x, w[, bias]) a chunk of rows at a time, never holding all the logits"},
  };
}

}  // namespace gradc::ir
