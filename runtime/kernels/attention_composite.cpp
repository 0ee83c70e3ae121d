#include "runtime/kernels/attention_composite.h"

#include <ATen/ops/bmm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/kernels/kernels.h"


namespace gradc::runtime {
namespace {

// The node's shapes as the blocks see them.
struct Shapes {
  std::vector<std::int64_t> leading;  // q's leading axes
  ir::AttentionChunks chunks;
};

Shapes shapesOf(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionCall& call) {
  TORCH_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(),
              "attention: q, k and v must have one rank of at least 2");
  Shapes s;
  s.leading.assign(q.sizes().begin(), q.sizes().end() - 2);
  s.chunks = attentionChunksOf(q, k, v, call.causal, call.p > 0.0);
  TORCH_CHECK(!s.chunks.dropout || call.drop,
              "fused attention with dropout: this device draws no dropout mask for it (compile with --no-fuse)");
  return s;
}

// x [..., rows, D] expanded over q's leading axes and flattened to [L, rows, D]: a view where
// the leading axes merge in place, else a contiguous copy.
at::Tensor flat(const at::Tensor& x, const Shapes& s) {
  std::vector<std::int64_t> shape = s.leading;
  shape.push_back(x.size(-2));
  shape.push_back(x.size(-1));
  return x.expand(shape).reshape({s.chunks.leading, x.size(-2), x.size(-1)});
}

// Scores of query rows [i0, i0 + n) against every key, scaled and masked: [L, n, S_kv].
at::Tensor blockScores(const at::Tensor& q3, const at::Tensor& k3, std::int64_t i0, std::int64_t n,
                       const AttentionCall& call) {
  at::Tensor s = at::bmm(q3.narrow(1, i0, n), k3.transpose(1, 2));
  s.mul_(call.scale);
  if (call.causal) {  // key j is hidden from query i0 + r when j > i0 + r
    at::Tensor above = at::ones({n, k3.size(1)}, s.options().dtype(at::kBool)).triu_(i0 + 1);
    s.masked_fill_(above, -std::numeric_limits<double>::infinity());
  }
  return s;
}

void dropBlock(at::Tensor& block, std::int64_t i0, std::int64_t n, const Shapes& s, const AttentionCall& call) {
  if (!s.chunks.dropout) return;
  const std::int64_t keys = s.chunks.keys;
  (*call.drop)(block, call.rngOffset + i0 * keys, n * keys, s.chunks.queries * keys);
}

// Sums g [leading of q..., rows, cols] down to `shape` (k's or v's: shared heads).
at::Tensor sumToShape(const at::Tensor& g, at::IntArrayRef shape) {
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 0; d < g.dim() - 2; ++d)
    if (shape[d] == 1 && g.size(d) != 1) dims.push_back(d);
  return dims.empty() ? g : g.sum(dims, true);
}

}  // namespace

AttentionCall attentionCallOf(const ir::Node& node) {
  AttentionCall call;
  call.causal = ir::getBool(node.attrs(), "causal").value_or(false);
  call.scale = kernel_detail::floatAttr(node, "scale");
  call.p = ir::getFloat(node.attrs(), "p").value_or(0.0);
  call.rngOffset = ir::getInt(node.attrs(), "rng_offset").value_or(0);
  return call;
}

ir::AttentionChunks attentionChunksOf(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                      bool dropout) {
  ir::AttentionChunks c;
  for (std::int64_t d = 0; d + 2 < q.dim(); ++d) {
    c.leading *= q.size(d);
    c.kvLeading *= k.size(d);
  }
  c.queries = q.size(-2);
  c.keys = k.size(-2);
  c.headDim = q.size(-1);
  c.valueDim = v.size(-1);
  c.elementBytes = static_cast<std::int64_t>(q.element_size());
  c.causal = causal;
  c.dropout = dropout;
  return c;
}

void composedAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
                       at::Tensor& lse, const AttentionCall& call) {
  const Shapes s = shapesOf(q, k, v, call);
  const ir::AttentionChunks& c = s.chunks;
  const at::Tensor q3 = flat(q, s), k3 = flat(k, s), v3 = flat(v, s);
  at::Tensor out3 = out.view({c.leading, c.queries, c.valueDim});
  at::Tensor lse2 = lse.view({c.leading, c.queries});
  const std::int64_t rows = call.blockRows > 0 ? call.blockRows : c.rows();
  for (std::int64_t i0 = 0; i0 < c.queries; i0 += rows) {
    const std::int64_t n = std::min(rows, c.queries - i0);
    at::Tensor p = blockScores(q3, k3, i0, n, call);
    at::Tensor m = p.amax(-1, true);
    p.sub_(m).exp_();
    at::Tensor sum = p.sum(-1, true);
    p.div_(sum);
    lse2.narrow(1, i0, n).copy_(m.add_(sum.log_()).squeeze(-1));
    dropBlock(p, i0, n, s, call);
    out3.narrow(1, i0, n).copy_(at::bmm(p, v3));
  }
}

void composedAttentionBackward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& out, const at::Tensor& lse, at::Tensor& dq, at::Tensor& dk,
                               at::Tensor& dv, const AttentionCall& call) {
  const Shapes s = shapesOf(q, k, v, call);
  const ir::AttentionChunks& c = s.chunks;
  const at::Tensor q3 = flat(q, s), k3 = flat(k, s), v3 = flat(v, s);
  const at::Tensor dout3 = flat(dout, s), out3 = flat(out, s);
  const at::Tensor lse2 = lse.reshape({c.leading, c.queries});
  at::Tensor dq3 = dq.view({c.leading, c.queries, c.headDim});
  // dk and dv over the expanded heads: the results themselves unless heads are shared.
  at::Tensor dk3 = c.sharedHeads() ? at::zeros({c.leading, c.keys, c.headDim}, dk.options())
                                   : dk.view({c.leading, c.keys, c.headDim}).zero_();
  at::Tensor dv3 = c.sharedHeads() ? at::zeros({c.leading, c.keys, c.valueDim}, dv.options())
                                   : dv.view({c.leading, c.keys, c.valueDim}).zero_();
  const std::int64_t rows = call.blockRows > 0 ? call.blockRows : c.rows();
  for (std::int64_t i0 = 0; i0 < c.queries; i0 += rows) {
    const std::int64_t n = std::min(rows, c.queries - i0);
    const at::Tensor doutBlock = dout3.narrow(1, i0, n);
    at::Tensor p = blockScores(q3, k3, i0, n, call);
    p.sub_(lse2.narrow(1, i0, n).unsqueeze(-1)).exp_();
    at::Tensor dp = at::bmm(doutBlock, v3.transpose(1, 2));
    if (c.dropout) {
      {
        at::Tensor kept = p.clone();
        dropBlock(kept, i0, n, s, call);
        dv3.baddbmm_(kept.transpose(1, 2), doutBlock);
      }
      dropBlock(dp, i0, n, s, call);
    } else {
      dv3.baddbmm_(p.transpose(1, 2), doutBlock);
    }
    dp.sub_(doutBlock.mul(out3.narrow(1, i0, n)).sum(-1, true));
    p.mul_(dp);  // dS
    dp.reset();
    dq3.narrow(1, i0, n).copy_(at::bmm(p, k3).mul_(call.scale));
    dk3.baddbmm_(p.transpose(1, 2), q3.narrow(1, i0, n), 1.0, call.scale);
  }
  if (c.sharedHeads()) {
    std::vector<std::int64_t> shape = s.leading;
    shape.push_back(c.keys);
    shape.push_back(c.headDim);
    dk.copy_(sumToShape(dk3.view(shape), dk.sizes()));
    shape.back() = c.valueDim;
    dv.copy_(sumToShape(dv3.view(shape), dv.sizes()));
  }
}

}  // namespace gradc::runtime
