// Kernels of the fused LM-head loss (ir/ops_fused_loss.cpp): linear_cross_entropy and its
// backward, which never hold more than one chunk of logits.
//
// Shape legend: N rows (the target's elements), V classes, D features, c rows per chunk
// (ir::linearCrossEntropyChunkRows). The temporaries are allocated once, before the loop, and
// are exactly the blocks the op table declares as workspace; every ATen call in the loop writes
// into a slice of them or of a result (`_out` variants and in-place ops), so the loop itself
// allocates nothing and the chunk buffers are reused.
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/log.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/sum.h>

#include <algorithm>

#include "ir/op_table.h"
#include "runtime/kernels.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

struct Rows {
  at::Tensor x;       // [N, D]
  at::Tensor target;  // [N, 1], i64
  std::int64_t n = 0, chunk = 0;
};

Rows rowsOf(const KernelArgs& a, const at::Tensor& x, const at::Tensor& w, const at::Tensor& target) {
  Rows r;
  r.x = x.reshape({-1, w.size(1)});
  r.n = r.x.size(0);
  r.target = target.reshape({-1, 1});
  if (r.target.scalar_type() != at::kLong) r.target = r.target.to(at::kLong);
  r.chunk = ir::linearCrossEntropyChunkRows(r.n, intAttr(a.node, "chunks"));
  return r;
}

// logits = x_chunk @ w^T (+ bias) into the chunk buffer `out` ([rows, V]).
void chunkLogits(at::Tensor& out, const at::Tensor& xChunk, const at::Tensor& w, const at::Tensor* bias) {
  if (bias)
    at::addmm_out(out, *bias, xChunk, w.t());
  else
    at::mm_out(out, xChunk, w.t());
}

// (x[..., D], w[V, D], target[...][, bias[V]]) -> (loss[], lse[...]).
// Per chunk: logits; the target logit of each row (picked); the row maximum m; exp(logits - m)
// in place and its row sum s; lse = log(s) + m. Then loss = mean over rows of lse - picked,
// which is cross_entropy's mean of -log_softmax(logits)[target].
Results linearCrossEntropyKernel(const KernelArgs& a) {
  const at::Tensor& w = a.operands[1];
  const at::Tensor* bias = a.operands.size() > 3 ? &a.operands[3] : nullptr;
  Rows r = rowsOf(a, a.operands[0], w, a.operands[2]);
  const at::TensorOptions options = optionsFor(a, a.node.result(0)->type().dtype);
  at::Tensor loss = resultBuffer(a, 0);
  at::Tensor lse = resultBuffer(a, 1);
  at::Tensor lseRows = lse.view({r.n, 1});

  at::Tensor logits = at::empty({r.chunk, w.size(0)}, options);
  at::Tensor rowMax = at::empty({r.chunk, 1}, options);
  at::Tensor rowSum = at::empty({r.chunk, 1}, options);
  at::Tensor picked = at::empty({r.n, 1}, options);
  for (std::int64_t begin = 0; begin < r.n; begin += r.chunk) {
    const std::int64_t rows = std::min(r.chunk, r.n - begin);
    at::Tensor chunk = logits.narrow(0, 0, rows);
    chunkLogits(chunk, r.x.narrow(0, begin, rows), w, bias);
    at::Tensor pickedRows = picked.narrow(0, begin, rows);
    at::gather_out(pickedRows, chunk, 1, r.target.narrow(0, begin, rows));
    at::Tensor m = rowMax.narrow(0, 0, rows);
    at::amax_out(m, chunk, {1}, /*keepdim=*/true);
    chunk.sub_(m).exp_();
    at::Tensor s = rowSum.narrow(0, 0, rows);
    at::sum_out(s, chunk, {1}, /*keepdim=*/true);
    at::Tensor lseChunk = lseRows.narrow(0, begin, rows);
    at::log_out(lseChunk, s);
    lseChunk.add_(m);
  }
  picked.neg_().add_(lseRows);
  at::mean_out(loss, picked, at::IntArrayRef{}, /*keepdim=*/false);
  return {loss, lse};
}

// (grad[], x, w, target, lse[, bias]) -> (grad_x, grad_w[, grad_bias]).
// Per chunk: the logits again; softmax = exp(logits - lse) in place; minus 1 at the targets;
// times grad / N: the chunk of d loss / d logits. Then grad_x's rows of the chunk = chunk @ w,
// grad_w += chunk^T @ x_chunk, grad_bias += chunk^T @ 1 (the first chunk writes, later ones add).
Results linearCrossEntropyBackwardKernel(const KernelArgs& a) {
  const at::Tensor& grad = a.operands[0];
  const at::Tensor& w = a.operands[2];
  const at::Tensor* bias = a.operands.size() > 5 ? &a.operands[5] : nullptr;
  Rows r = rowsOf(a, a.operands[1], w, a.operands[3]);
  const at::Tensor lseRows = a.operands[4].reshape({r.n, 1});
  const at::TensorOptions options = optionsFor(a, a.node.result(0)->type().dtype);
  at::Tensor gradX = resultBuffer(a, 0);
  at::Tensor gradW = resultBuffer(a, 1);
  at::Tensor gradB = bias ? resultBuffer(a, 2) : at::Tensor();
  at::Tensor gradXRows = gradX.view({r.n, w.size(1)});

  at::Tensor logits = at::empty({r.chunk, w.size(0)}, options);
  at::Tensor minusOne = at::empty({r.chunk, 1}, options).fill_(-1.0);
  at::Tensor ones = bias ? at::empty({r.chunk}, options).fill_(1.0) : at::Tensor();
  const at::Tensor factor = grad.div(static_cast<double>(r.n));
  for (std::int64_t begin = 0; begin < r.n; begin += r.chunk) {
    const std::int64_t rows = std::min(r.chunk, r.n - begin);
    at::Tensor chunk = logits.narrow(0, 0, rows);
    const at::Tensor xChunk = r.x.narrow(0, begin, rows);
    chunkLogits(chunk, xChunk, w, bias);
    chunk.sub_(lseRows.narrow(0, begin, rows)).exp_();
    chunk.scatter_add_(1, r.target.narrow(0, begin, rows), minusOne.narrow(0, 0, rows));
    chunk.mul_(factor);
    at::Tensor gradXChunk = gradXRows.narrow(0, begin, rows);
    at::mm_out(gradXChunk, chunk, w);
    if (begin == 0)
      at::mm_out(gradW, chunk.t(), xChunk);
    else
      gradW.addmm_(chunk.t(), xChunk);
    if (bias) {
      if (begin == 0)
        at::mv_out(gradB, chunk.t(), ones.narrow(0, 0, rows));
      else
        gradB.addmv_(chunk.t(), ones.narrow(0, 0, rows));
    }
  }
  if (bias) return {gradX, gradW, gradB};
  return {gradX, gradW};
}

const KernelEntry kFusedLoss[] = {
    {"linear_cross_entropy", linearCrossEntropyKernel},
    {"linear_cross_entropy_backward", linearCrossEntropyBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> fusedLossKernels() { return kFusedLoss; }

}  // namespace gradc::runtime
