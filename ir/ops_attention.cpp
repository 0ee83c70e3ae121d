// The op table's entries for fused scaled dot-product attention (what passes/fuse_attention.h
// makes of the spec's attention core):
//
// attention(q[..., S, Dh], k[..., S_kv, Dh], v[..., S_kv, Dv]){causal, scale, p, rng, rng_offset}
//     -> (out[..., S, Dv], lse[..., S]):
//     scores = scale * q k^T, masked to -inf where j > i when causal (top-left aligned, as the
//     causal_mask op), probs = softmax(scores) over the keys, dropped out with probability p
//     (scaled by 1 / (1 - p)), out = probs v; lse = log(sum_j exp(scores)) per query row, all
//     the backward needs besides q, k, v and out. The leading axes of k and v (equal to each
//     other) broadcast against q's: an axis of extent 1 serves every query index along it
//     (grouped-query attention's shared key and value heads).
// attention_backward(dout, q, k, v, out, lse){same attributes} -> (dq, dk, dv): FlashAttention-2's
//     backward, recomputing each tile's probabilities from q, k and lse; dk and dv summed over
//     the query indices that share a key head.
//
// Neither op ever holds the [S, S_kv] matrix. On the host the kernels work one tile of scores
// per thread (ir/attention_tiles.h), and the declared workspace is exactly the threads' tile
// slots (the host's rule, runtime/host/host_target.cpp). The portable kernels (ATen calls,
// runtime/kernels/attention_composite.h) allocate the composed blocks of at most
// kChunkScoreBytes of scores (linear in S apart from them): the op table's rule. CUDA runs
// ATen's fused kernel where it can, whose results are allocated beside the arena before they are
// copied into the planned buffers (its rule: runtime/cuda/cuda_target.cpp).
//
// Dropout draws element (row r of the flattened leading axes and queries, key j) of the
// probabilities at stream position rng_offset + r S_kv + j of the node's stream (runtime/
// counter_rng.h): the position the dropout op on the unfused probabilities [..., S, S_kv] draws
// it at, so fused and unfused steps drop the same elements (fuse_attention copies the dropout
// node's rng and rng_offset). Both ops are `random`: micro-batching re-keys them, and the
// backward node carries the forward's key, so it reproduces the forward's mask.
#include <string>

#include "ir/attention_rules.h"
#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

Shape leading(const TensorType& t) { return Shape(t.shape.begin(), t.shape.end() - 2); }

Status checkAttentionOperands(const OpContext& c, size_t first) {
  const TensorType& q = c.inputs[first];
  const TensorType& k = c.inputs[first + 1];
  const TensorType& v = c.inputs[first + 2];
  if (q.dtype != DType::f32 && q.dtype != DType::f64)
    return Error{"the queries must be f32 or f64 (the fused kernel's types), got " + typeStr(q)};
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    return Error{"q, k and v must have one dtype, got " + typeStr(q) + ", " + typeStr(k) + " and " + typeStr(v)};
  if (q.rank() < 2 || k.rank() != q.rank() || v.rank() != q.rank())
    return Error{"q, k and v must have one rank of at least 2 ([..., positions, features]), got " + typeStr(q) + ", " +
                 typeStr(k) + " and " + typeStr(v)};
  const int r = q.rank();
  if (k.shape[r - 1] != q.shape[r - 1])
    return Error{"q and k must have the same head size (last axis), got " + typeStr(q) + " and " + typeStr(k)};
  if (v.shape[r - 2] != k.shape[r - 2] || leading(v) != leading(k))
    return Error{"k and v must have the same leading axes and key positions, got " + typeStr(k) + " and " + typeStr(v)};
  for (int d = 0; d < r - 2; ++d)
    if (k.shape[d] != q.shape[d] && k.shape[d] != 1)
      return Error{"the leading axes of k and v must equal q's or be 1 (shared), got " + typeStr(q) + " and " +
                   typeStr(k)};
  const double p = getFloat(c.attrs, "p").value_or(0.0);
  if (!(p >= 0.0 && p < 1.0)) return Error{"dropout p must be in [0, 1), got " + std::to_string(p)};
  if (p > 0.0 && !getInt(c.attrs, "rng")) return Error{"dropout p > 0 needs the rng attribute (its stream key)"};
  if (!(*getFloat(c.attrs, "scale") > 0)) return Error{"scale must be positive"};
  return {};
}

Results inferAttention(const OpContext& c) {
  if (Status s = checkAttentionOperands(c, 0); !s) return s.error();
  const TensorType& q = c.inputs[0];
  Shape out = q.shape;
  out.back() = c.inputs[2].shape.back();
  Shape lse(q.shape.begin(), q.shape.end() - 1);
  if (!checkedNumel(out)) return fail("result shape " + shapeToString(out) + " is too large");
  return std::vector<TensorType>{{q.dtype, out}, {q.dtype, lse}};
}

Results inferAttentionBackward(const OpContext& c) {
  if (Status s = checkAttentionOperands(c, 1); !s) return s.error();
  const TensorType& q = c.inputs[1];
  Shape outShape = q.shape;
  outShape.back() = c.inputs[3].shape.back();
  const TensorType out{q.dtype, outShape};
  if (c.inputs[0] != out) return fail("the output gradient must be " + typeStr(out) + ", got " + typeStr(c.inputs[0]));
  if (c.inputs[4] != out) return fail("the saved output must be " + typeStr(out) + ", got " + typeStr(c.inputs[4]));
  const TensorType lse{q.dtype, Shape(q.shape.begin(), q.shape.end() - 1)};
  if (c.inputs[5] != lse) return fail("the saved log-sum-exp must be " + typeStr(lse) + ", got " + typeStr(c.inputs[5]));
  return std::vector<TensorType>{c.inputs[1], c.inputs[2], c.inputs[3]};
}

// Score elements the kernels compute: every (query, key) pair, or with the causal mask the
// pairs with j <= i (the kernels skip tiles above the diagonal).
std::int64_t scorePairs(const OpContext& c, size_t first) {
  const TensorType& q = c.inputs[first];
  const TensorType& k = c.inputs[first + 1];
  const int r = q.rank();
  const std::int64_t S = q.shape[r - 2], Skv = k.shape[r - 2];
  const std::int64_t heads = q.numel() / (S * q.shape[r - 1]);
  std::int64_t perHead = S * Skv;
  if (getBool(c.attrs, "causal").value_or(false)) {
    const std::int64_t full = std::min(S, Skv);  // rows i < Skv see i + 1 keys, the rest all Skv
    perHead = full * (full + 1) / 2 + (S - full) * Skv;
  }
  return saturatingMul(heads, perHead);
}

std::int64_t flopsAttention(const OpContext& c, Types) {
  const std::int64_t dh = c.inputs[0].shape.back(), dv = c.inputs[2].shape.back();
  return saturatingMul(scorePairs(c, 0), 2 * dh + 2 * dv + 5);
}

std::int64_t flopsAttentionBackward(const OpContext& c, Types) {
  const std::int64_t dh = c.inputs[1].shape.back(), dv = c.inputs[3].shape.back();
  return saturatingMul(scorePairs(c, 1), 6 * dh + 4 * dv + 6);
}

// The composed kernels' blocks (ir/attention_tiles.h), the portable kernel's workspace; the
// host's tiled kernels and CUDA's fused one have rules of their own (runtime/host,
// runtime/cuda: *_target.cpp).
std::int64_t workspaceAttention(const OpContext& c, Types) { return attentionChunksOf(c, 0).forwardBytes(); }
std::int64_t workspaceAttentionBackward(const OpContext& c, Types) { return attentionChunksOf(c, 1).backwardBytes(); }

std::vector<AttrSpec> attentionAttrs() {
  return {{"causal", AttrKind::Bool, true, "mask key j from query i where j > i"},
          {"scale", AttrKind::Float, true, "the scores' factor (1 / sqrt(Dh))"},
          {"p", AttrKind::Float, false, "dropout probability on the attention probabilities (default 0)"},
          {"rng", AttrKind::Int, false, "key of the dropout stream: (seed, step, rng); needed when p > 0"},
          {"rng_offset", AttrKind::Int, false,
           "stream position of the probabilities' element 0 (default 0): a data-parallel shard draws its rows of the "
           "full batch's mask"}};
}

}  // namespace

AttentionTiling attentionTilingOf(const OpContext& c, size_t first) {
  const TensorType& q = c.inputs[first];
  const int r = q.rank();
  return AttentionTiling::of(q.shape[r - 2], c.inputs[first + 1].shape[r - 2], q.shape[r - 1],
                             c.inputs[first + 2].shape[r - 1], getFloat(c.attrs, "p").value_or(0.0) > 0.0);
}

AttentionChunks attentionChunksOf(const OpContext& c, size_t first) {
  const TensorType& q = c.inputs[first];
  const TensorType& k = c.inputs[first + 1];
  const int r = q.rank();
  AttentionChunks a;
  for (int d = 0; d < r - 2; ++d) {
    a.leading *= q.shape[d];
    a.kvLeading *= k.shape[d];
  }
  a.queries = q.shape[r - 2];
  a.keys = k.shape[r - 2];
  a.headDim = q.shape[r - 1];
  a.valueDim = c.inputs[first + 2].shape[r - 1];
  a.elementBytes = dtypeSize(q.dtype);
  a.causal = getBool(c.attrs, "causal").value_or(false);
  a.dropout = getFloat(c.attrs, "p").value_or(0.0) > 0.0;
  return a;
}

std::vector<OpInfo> attentionOps() {
  return {
      {.name = "attention", .minInputs = 3, .maxInputs = 3, .attrs = attentionAttrs(), .infer = inferAttention,
       .flops = flopsAttention, .workspaceBytes = workspaceAttention, .random = true,
       .stridedReads = StridedReads::InPlace, .role = OpRole::FusedAttention,
       .summary = "(q, k, v) -> (softmax(scale q k^T [causal]) [dropout] v, log-sum-exp per query), tiled: no "
                  "[S, S_kv] buffer"},
      {.name = "attention_backward", .minInputs = 6, .maxInputs = 6, .attrs = attentionAttrs(),
       .infer = inferAttentionBackward, .flops = flopsAttentionBackward, .workspaceBytes = workspaceAttentionBackward,
       .random = true, .stridedReads = StridedReads::InPlace,
       .summary = "(dout, q, k, v, out, lse) -> (dq, dk, dv) of attention, tiles recomputed from lse"},
  };
}

}  // namespace gradc::ir
