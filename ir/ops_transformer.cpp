// The op table's entries for the blocks of modern decoder models (LLaMA-style): silu (and the
// exp it is made of), rms_norm and rotary position embeddings, each with its backward.
//
// rms_norm(x[..., D], w[D]){eps} -> (y, rstd[..., 1]):
//     rstd = 1 / sqrt(mean(x^2 over D) + eps),  y = x * rstd * w.
// rms_norm_backward(g, x, rstd, w) -> (gx, gw), with xhat = x * rstd:
//     gx = rstd * (g w - xhat * mean(g w xhat over D)),  gw = sum over rows of g xhat.
//
// rope(x[..., S, ..., Dh]){base, seq_dim, inverse}: rotates the pairs (i, i + Dh/2) of the last
// axis by the angle pos * base^(-2i / Dh), where pos is the index along seq_dim (the
// "rotate_half" layout of GPT-NeoX and Hugging Face's LLaMA):
//     y[i] = x[i] cos - x[i + Dh/2] sin,  y[i + Dh/2] = x[i + Dh/2] cos + x[i] sin.
// A rotation's adjoint is the rotation by the opposite angle, so the gradient of rope is rope
// with `inverse` flipped (no separate backward op). Its kernel keeps a table of cos and sin per
// (pos, i) in the input's dtype.
#include <algorithm>
#include <string>

#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

Shape statsShape(const TensorType& x) {
  Shape s = x.shape;
  s.back() = 1;
  return s;
}

Results inferRmsNorm(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  if (x.rank() < 1) return fail("the input must have rank >= 1");
  const TensorType weight{x.dtype, {x.shape.back()}};
  if (c.inputs[1] != weight) return fail("the weight must be " + typeStr(weight) + ", got " + typeStr(c.inputs[1]));
  if (!(*getFloat(c.attrs, "eps") > 0)) return fail("eps must be positive");
  return std::vector<TensorType>{x, {x.dtype, statsShape(x)}};
}

Results inferRmsNormBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  const TensorType& x = c.inputs[1];
  if (g != x) return fail("the gradient and the input must have one type, got " + typeStr(g) + " and " + typeStr(x));
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  if (x.rank() < 1) return fail("the input must have rank >= 1");
  const TensorType stats{x.dtype, statsShape(x)};
  if (c.inputs[2] != stats) return fail("rstd must be " + typeStr(stats) + ", got " + typeStr(c.inputs[2]));
  const TensorType weight{x.dtype, {x.shape.back()}};
  if (c.inputs[3] != weight) return fail("the weight must be " + typeStr(weight) + ", got " + typeStr(c.inputs[3]));
  return std::vector<TensorType>{x, weight};
}

Results inferSiluBackward(const OpContext& c) {
  if (c.inputs[0] != c.inputs[1])
    return fail("the gradient and the input must have one type, got " + typeStr(c.inputs[0]) + " and " +
                typeStr(c.inputs[1]));
  return inferUnaryFloat(c);
}

// The position axis, normalised to [0, rank - 1); the last axis holds the rotated pairs.
std::optional<std::int64_t> ropeSeqAxis(const OpContext& c) {
  const std::int64_t rank = c.inputs[0].rank();
  std::int64_t d = *getInt(c.attrs, "seq_dim");
  if (d < 0) d += rank;
  if (d < 0 || d >= rank - 1) return std::nullopt;
  return d;
}

Results inferRope(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  if (x.rank() < 2) return fail("the input must have a position axis and a feature axis, got " + typeStr(x));
  if (x.shape.back() % 2 != 0) return fail("the last axis must have an even extent (pairs are rotated), got " + typeStr(x));
  if (!ropeSeqAxis(c))
    return fail("seq_dim " + std::to_string(*getInt(c.attrs, "seq_dim")) + " is not an axis before the last of " +
                typeStr(x));
  if (!(*getFloat(c.attrs, "base") > 0)) return fail("base must be positive");
  return std::vector<TensorType>{x};
}

// The cos and sin tables [S, Dh/2] while the positions [S] and the frequencies [Dh/2] they are
// made from are still alive, in the input's dtype; for bf16 and f16 in f32 (t = 4 bytes), then
// converted one after the other (e = the input's 2 bytes): cos in both while sin is f32, then
// sin in both while cos is converted.
std::int64_t workspaceRope(const OpContext& c, Types) {
  const DType dtype = c.inputs[0].dtype;
  const std::int64_t positions = c.inputs[0].shape[static_cast<size_t>(*ropeSeqAxis(c))];
  const std::int64_t half = c.inputs[0].shape.back() / 2;
  const std::int64_t table = positions * half;
  const bool reduced = dtype == DType::bf16 || dtype == DType::f16;
  const std::int64_t t = reduced ? 4 : dtypeSize(dtype), e = dtypeSize(dtype);
  std::int64_t peak = (2 * table + positions + half) * t;
  if (reduced) peak = std::max({peak, 2 * table * t + table * e, table * t + 2 * table * e});
  return peak;
}

// x * rstd and (g w) * (x * rstd), both of x's size, and their row means, at once; ATen's mean
// divides the row sums by a wrapped Scalar. (The host's kernel sums bf16 and f16 rows in a float
// loop of its own, which wraps none: its rule, runtime/host/host_target.cpp.)
std::int64_t workspaceRmsNormBackward(const OpContext& c, Types) {
  const TensorType& x = c.inputs[1];
  return 2 * x.bytes() + c.inputs[2].numel() * dtypeSize(x.dtype) + scalarOperandBytes(x.dtype);
}

std::int64_t flopsRmsNorm(const OpContext& c, Types) { return 4 * c.inputs[0].numel(); }

// The forward adds eps as a Scalar operand, and ATen's mean divides by one (each wrapped in a
// 0-dim tensor and cast, one at a time).
std::int64_t workspaceRmsNorm(const OpContext& c, Types) { return scalarOperandBytes(c.inputs[0].dtype); }
std::int64_t flopsRmsNormBackward(const OpContext& c, Types) { return 8 * c.inputs[1].numel(); }

}  // namespace

std::vector<OpInfo> transformerOps() {
  return {
      {.name = "silu", .minInputs = 1, .maxInputs = 1, .infer = inferUnaryFloat, .flops = perResultElement<4>,
       .elementwise = true, .stridedReads = StridedReads::InPlace, .summary = "x * sigmoid(x) (SiLU, swish)"},
      {.name = "silu_backward", .minInputs = 2, .maxInputs = 2, .infer = inferSiluBackward,
       .flops = perResultElement<6>, .elementwise = true, .stridedReads = StridedReads::InPlace,
       .summary = "(g, x) -> g * d silu(x) / dx"},
      {.name = "exp", .minInputs = 1, .maxInputs = 1, .infer = inferUnaryFloat, .flops = perResultElement<1>,
       .elementwise = true, .stridedReads = StridedReads::InPlace, .summary = "e^x"},
      {.name = "rms_norm", .minInputs = 2, .maxInputs = 2,
       .attrs = {{"eps", AttrKind::Float, true, "added to the mean square"}}, .infer = inferRmsNorm,
       .flops = flopsRmsNorm, .workspaceBytes = workspaceRmsNorm,
       .summary = "(x[..., D], w[D]) -> (x / sqrt(mean(x^2) + eps) * w, rstd[..., 1]) over the last axis"},
      {.name = "rms_norm_backward", .minInputs = 4, .maxInputs = 4, .infer = inferRmsNormBackward,
       .flops = flopsRmsNormBackward, .workspaceBytes = workspaceRmsNormBackward, .summary = "(g, x, rstd, w) -> (gx, gw) of rms_norm"},
      {.name = "rope", .minInputs = 1, .maxInputs = 1,
       .attrs = {{"base", AttrKind::Float, true, "frequency base: pair i turns by pos * base^(-2i / Dh)"},
                 {"seq_dim", AttrKind::Int, true, "the position axis (negative counts from the end)"},
                 {"inverse", AttrKind::Bool, true, "rotate by the opposite angle (the gradient of rope)"}},
       .infer = inferRope, .flops = perResultElement<3>, .workspaceBytes = workspaceRope,
       .summary = "rotary position embedding of the last axis' pairs (i, i + Dh/2), positions along seq_dim"},
  };
}

}  // namespace gradc::ir
