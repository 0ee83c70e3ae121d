// The fused attention ops (ir/ops_attention.cpp) composed of ATen calls, for devices whose
// kernel table has no kernel of their own for a node (the portable kernels, and CUDA where its
// fused kernel does not fit the node: shared key/value heads, dropout, f64, unaligned rows).
//
// The queries run in blocks of ir::AttentionChunks::rows() rows of every leading index at once
// (q, k and v flattened to [L, S, D]; shared key/value heads expanded over q's leading axes), so
// no call holds more than one block of scores, [L, rows, S_kv], of at most
// ir::kChunkScoreBytes (unless one row is larger), and everything a call allocates stays within
// ir::AttentionChunks' bound: a CUDA plan's declared workspace. Per block:
//     forward:  s = scale q k^T [causal mask];  m = rowmax s;  p = exp(s - m) / rowsum;
//               lse = m + log rowsum;  out = dropout(p) v
//     backward: p = exp(scale q k^T [mask] - lse);  dv += dropout(p)^T dout;
//               ds = p (dropout'(dout v^T) - rowsum(dout * out));  dq = scale ds k;
//               dk += scale ds^T q
// Dropout is the caller's: `AttentionDropout` zeroes and scales a block of probabilities in
// place with the mask the dropout op draws on the unfused [..., S, S_kv] probabilities (element
// (l, i, j) at stream position rng_offset + (l S + i) S_kv + j), so fused and unfused steps drop
// the same elements on every device. Without one, dropout is refused.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "ir/attention_tiles.h"
#include "ir/graph.h"

namespace gradc::runtime {

// Applies dropout in place to `block` (contiguous), whose element e sits at stream position
// first + (e / run) * stride + e % run: runs of `run` elements (one leading index's rows of the
// block), `stride` positions apart.
using AttentionDropout =
    std::function<void(at::Tensor& block, std::int64_t first, std::int64_t run, std::int64_t stride)>;

struct AttentionCall {
  bool causal = false;
  double scale = 1.0;
  double p = 0.0;                           // dropout probability
  std::int64_t rngOffset = 0;               // the node's rng_offset
  const AttentionDropout* drop = nullptr;   // required when p > 0
  std::int64_t blockRows = 0;               // query rows per block; 0: ir::AttentionChunks::rows(), as planned
};

// The node's attributes as a call (no dropout callback: the device's kernel sets one).
AttentionCall attentionCallOf(const ir::Node& node);

// The node's shapes as the blocks and the op table's rules see them (ir::AttentionChunks).
ir::AttentionChunks attentionChunksOf(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                      bool dropout);

// out [..., S, Dv] and lse [..., S] (contiguous, written in place) of attention(q, k, v).
void composedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
                       at::Tensor& lse, const AttentionCall& call);

// dq, dk, dv (contiguous, written in place) of attention_backward(dout, q, k, v, out, lse).
void composedAttentionBackward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& out, const at::Tensor& lse, at::Tensor& dq, at::Tensor& dk,
                               at::Tensor& dv, const AttentionCall& call);

}  // namespace gradc::runtime
