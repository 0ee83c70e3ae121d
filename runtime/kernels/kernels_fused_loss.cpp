// The kernel of the fused LM-head loss (ir/ops_fused_loss.cpp): linear_cross_entropy, which
// never holds more than one chunk of logits.
//
// Shape legend: N rows (the target's elements), V classes, D features, c rows per chunk
// (ir::linearCrossEntropyChunkRows). The temporaries are allocated once, before the loop, and
// are exactly the op table's declared workspace (in bf16 and f16 also one product's temporaries
// at a time, runtime/kernels/low_precision_products.h); every ATen call in the loop writes into a
// slice of them or of a result (`_out` variants and in-place ops), so the loop allocates
// nothing else and the chunk buffers are reused.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/sum.h>

#include <algorithm>

#include "ir/op_table.h"
#include "runtime/host/host_workspace.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/low_precision_products.h"
#include "runtime/kernels/row_blocked_products.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// (x[..., D], w[V, D], target[...][, bias[V]]) -> (loss[], grad_x[..., D], grad_w[V, D][, grad_bias[V]]),
// the gradients for an upstream gradient of 1.
// Per chunk of rows: logits = x_chunk @ w^T (+ bias); the target logit of each row; the row
// maximum m; exp(logits - m) in place and its row sum s; softmax = that / s in place; the row's
// loss term log(s) + m - logits[target]; then (softmax - onehot(target)) / N, the chunk of
// d loss / d logits, gives grad_x's rows of the chunk (chunk @ w) and adds chunk^T @ x_chunk to
// grad_w and chunk^T @ 1 to grad_bias (the first chunk writes them). loss = (sum of the row
// terms) / N, as cross_entropy's mean.
// The host's kernel: bf16 and f16 products with their planned temporaries, the others in row
// blocks (runtime/kernels/row_blocked_products.h); the portable one: one ATen product each.
template <bool Host>
Results linearCrossEntropyKernel(const KernelArgs& a) {
  const at::Tensor& w = a.operands[1];
  const bool bias = a.operands.size() > 3;
  const std::int64_t classes = w.size(0), features = w.size(1);
  const at::Tensor x = a.operands[0].reshape({-1, features});
  const std::int64_t n = x.size(0);
  at::Tensor target = a.operands[2].reshape({-1, 1});
  if (target.scalar_type() != at::kLong) target = target.to(at::kLong);
  const std::int64_t c = ir::linearCrossEntropyChunkRows(n, intAttr(a.node, "chunks"));
  const at::TensorOptions options = optionsFor(a, a.node.result(0)->type().dtype);

  at::Tensor loss = resultBuffer(a, 0);
  at::Tensor gradX = resultBuffer(a, 1);
  at::Tensor gradW = resultBuffer(a, 2);
  at::Tensor gradB = bias ? resultBuffer(a, 3) : at::Tensor();
  at::Tensor gradXRows = gradX.view({n, features});

  at::Tensor logits = at::empty({c, classes}, options);
  at::Tensor rowMax = at::empty({c, 1}, options);
  at::Tensor rowSum = at::empty({c, 1}, options);
  at::Tensor minusOne = at::empty({c, 1}, options).fill_(-1.0);
  at::Tensor ones = bias ? at::empty({c}, options).fill_(1.0) : at::Tensor();
  at::Tensor terms = at::empty({n, 1}, options);
  at::Tensor invN = at::empty({}, options).fill_(1.0 / static_cast<double>(n));
  // bf16 and f16 on the CPU: each product with this many bytes of temporaries (declared
  // workspace); elsewhere (0) ATen's.
  const std::int64_t scratch =
      host::linearCrossEntropyProductScratch(n, intAttr(a.node, "chunks"), features, classes, bias,
                                           a.node.operand(0)->type().dtype, at::get_num_threads());
  const at::Tensor* biasOperand = bias ? &a.operands[3] : nullptr;
  const auto product = [](const at::Tensor& out, const at::Tensor& x, const at::Tensor& rhs, const at::Tensor* b) {
    if constexpr (Host) {
      productInRowBlocks(out, x, rhs, b);
    } else {
      at::Tensor o = out;
      if (b) at::addmm_out(o, *b, x, rhs);
      else at::mm_out(o, x, rhs);
    }
  };
  for (std::int64_t begin = 0; begin < n; begin += c) {
    const std::int64_t rows = std::min(c, n - begin);
    at::Tensor chunk = logits.narrow(0, 0, rows);
    const at::Tensor xChunk = x.narrow(0, begin, rows);
    const at::Tensor targetChunk = target.narrow(0, begin, rows);
    if (!(Host && lowPrecisionProduct2d(xChunk, w.t(), biasOperand, chunk, scratch)))
      product(chunk, xChunk, w.t(), biasOperand);
    at::Tensor term = terms.narrow(0, begin, rows);
    at::gather_out(term, chunk, 1, targetChunk);
    at::Tensor m = rowMax.narrow(0, 0, rows);
    at::amax_out(m, chunk, {1}, /*keepdim=*/true);
    chunk.sub_(m).exp_();
    at::Tensor s = rowSum.narrow(0, 0, rows);
    at::sum_out(s, chunk, {1}, /*keepdim=*/true);
    chunk.div_(s);
    term.neg_().add_(s.log_()).add_(m);  // log(s) + m - logits[target]
    chunk.scatter_add_(1, targetChunk, minusOne.narrow(0, 0, rows));
    chunk.mul_(invN);
    at::Tensor gradXChunk = gradXRows.narrow(0, begin, rows);
    if (!(Host && lowPrecisionProduct2d(chunk, w, nullptr, gradXChunk, scratch))) product(gradXChunk, chunk, w, nullptr);
    const bool accumulate = begin > 0;
    if (!(Host && lowPrecisionProduct2d(chunk.t(), xChunk, nullptr, gradW, scratch, accumulate))) {
      if (accumulate)
        gradW.addmm_(chunk.t(), xChunk);
      else
        at::mm_out(gradW, chunk.t(), xChunk);
    }
    if (bias) {
      const at::Tensor onesColumn = ones.narrow(0, 0, rows).view({rows, 1});
      if (Host && lowPrecisionProduct2d(chunk.t(), onesColumn, nullptr, gradB.view({classes, 1}), scratch, accumulate))
        continue;
      if (begin == 0)
        at::mv_out(gradB, chunk.t(), ones.narrow(0, 0, rows));
      else
        gradB.addmv_(chunk.t(), ones.narrow(0, 0, rows));
    }
  }
  at::sum_out(loss, terms, at::IntArrayRef{}, /*keepdim=*/false).mul_(invN);
  if (bias) return {loss, gradX, gradW, gradB};
  return {loss, gradX, gradW};
}

const KernelEntry kFusedLoss[] = {
    {"linear_cross_entropy", linearCrossEntropyKernel<false>},
};
const KernelEntry kHostFusedLoss[] = {
    {"linear_cross_entropy", linearCrossEntropyKernel<true>},
};

}  // namespace

std::span<const KernelEntry> fusedLossKernels() { return kFusedLoss; }
std::span<const KernelEntry> hostFusedLossKernels() { return kHostFusedLoss; }

}  // namespace gradc::runtime
