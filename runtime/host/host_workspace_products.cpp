// The host's workspace rules of the matrix products (matmul, linear, linear_weight_grad) in bf16
// and f16, whose host kernels take their temporaries from the plan (runtime/kernels/low_precision_products.h)
// on one of two routes, the one onednn::bf16Route() names for this process:
//  - bf16 on oneDNN (a CPU with bf16 instructions): oneDNN's scratchpad of packed operand panels,
//    per thread, sized by the CPU's instruction set and cache blocking. The declared bytes are
//    oneDNN's own answer for the largest of the layouts the kernel may be given, so a plan holds
//    every layout's scratchpad and the kernel's allocation equals the plan.
//  - widened to f32 (bf16 elsewhere, f16 everywhere): each task's f32 panels
//    (ir/widened_products.h), a function of the shapes and the thread count alone.
// In f32 and f64 the products run on the BLAS or the tile kernels, which allocate nothing.
#include "runtime/host/host_workspace.h"

#include <algorithm>

#include "ir/op_rules.h"
#include "ir/widened_products.h"
#include "onednn/gemm.h"

namespace gradc::runtime::host {

using ir::DType;
using ir::OpContext;
using ir::TensorType;

namespace {

bool lowPrecision(const TensorType& t) { return t.dtype == DType::bf16 || t.dtype == DType::f16; }

}  // namespace

std::int64_t productWorkspace(const onednn::ProductShape& s, DType dtype, int threads) {
  if (dtype == DType::bf16 && onednn::bf16Route() == onednn::Bf16Route::kOneDnn)
    return onednn::scratchpadBound(s, threads);
  if (dtype != DType::bf16 && dtype != DType::f16) return 0;
  return ir::widenedBlocking(s.batched ? s.batch : 1, s.m, s.k, s.n, threads).bytes();
}

// Mirrors the kernel's folding (runtime/kernels/kernels_forward.cpp, at::matmul's): [..., m, k] @ [k, n]
// folds into one [M, k] @ [k, n] product, except a transposed 3-D operand, which runs batched
// with B shared; otherwise both operands are broadcast to the common batch and run batched, an
// operand without batch dims shared by every product.
std::int64_t workspaceMatmul(const OpContext& c, std::span<const TensorType> results) {
  const TensorType& a = c.inputs[0];
  const TensorType& b = c.inputs[1];
  if (!lowPrecision(a)) return 0;
  const int ra = a.rank(), rb = b.rank();
  const std::int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  const auto workspace = [&](const onednn::ProductShape& s) { return productWorkspace(s, a.dtype, c.kernelThreads); };
  if (ra == 2 && rb == 2) return workspace({.m = m, .k = k, .n = n});
  if (rb == 2) {
    std::int64_t folded = workspace({.m = a.numel() / k, .k = k, .n = n});
    if (ra != 3) return folded;
    return std::max(folded, workspace({.batch = a.shape[0], .m = m, .k = k, .n = n, .batched = true, .broadcastB = true}));
  }
  const TensorType& out = results[0];
  // The batch extents' products (of shapes the inference already checked).
  auto batchOf = [](const ir::Shape& s) { return ir::checkedNumel(ir::Shape(s.begin(), s.end() - 2)).value_or(1); };
  const std::int64_t batch = batchOf(out.shape), batchA = batchOf(a.shape), batchB = batchOf(b.shape);
  onednn::ProductShape s{.batch = batch, .m = m, .k = k, .n = n, .batched = true,
                         .broadcastA = batchA == 1, .broadcastB = batchB == 1};
  return workspace(s);
}

// x[..., in] @ weight^T over the flattened rows (+ bias).
std::int64_t workspaceLinear(const OpContext& c, std::span<const TensorType>) {
  const TensorType& x = c.inputs[0];
  if (!lowPrecision(x)) return 0;
  const std::int64_t in = x.shape.back(), out = c.inputs[1].shape[0];
  return productWorkspace({.m = x.numel() / in, .k = in, .n = out, .bias = c.inputs.size() == 3}, x.dtype,
                          c.kernelThreads);
}

// grad_out^T [out, rows] @ x [rows, in].
std::int64_t workspaceLinearWeightGrad(const OpContext& c, std::span<const TensorType>) {
  const TensorType& g = c.inputs[0];
  const TensorType& x = c.inputs[1];
  if (!lowPrecision(g)) return 0;
  const std::int64_t out = g.shape.back(), in = x.shape.back();
  return productWorkspace({.m = out, .k = x.numel() / in, .n = in}, g.dtype, c.kernelThreads);
}

std::int64_t linearCrossEntropyProductScratch(std::int64_t rows, std::int64_t chunks, std::int64_t features,
                                              std::int64_t classes, bool bias, DType dtype, int kernelThreads) {
  if ((dtype != DType::bf16 && dtype != DType::f16) || rows <= 0) return 0;
  const std::int64_t full = ir::linearCrossEntropyChunkRows(rows, chunks);
  const std::int64_t last = rows - (rows - 1) / full * full;
  std::int64_t most = 0;
  for (std::int64_t c : {full, last}) {
    const onednn::ProductShape products[] = {
        {.m = c, .k = features, .n = classes, .bias = bias},  // logits = x_chunk @ w^T (+ bias)
        {.m = c, .k = classes, .n = features},                // grad_x rows = chunk @ w
        {.m = classes, .k = c, .n = features},                // grad_w = chunk^T @ x_chunk
        {.m = classes, .k = c, .n = features, .accumulate = true},  // grad_w += ...
        {.m = classes, .k = c, .n = 1},                             // grad_bias = chunk^T @ 1
        {.m = classes, .k = c, .n = 1, .accumulate = true},         // grad_bias += ...
    };
    for (const onednn::ProductShape& p : products) {
      if (p.n == 1 && !bias) continue;
      most = std::max(most, productWorkspace(p, dtype, kernelThreads));
    }
  }
  return most;
}

// The portable rule's (the chunk of logits and its columns) and the products' temporaries.
std::int64_t workspaceLinearCrossEntropy(const OpContext& c, std::span<const TensorType> results) {
  const ir::OpInfo* op = ir::findOp("linear_cross_entropy");
  const std::int64_t portable = op->workspaceBytes ? op->workspaceBytes(c, results) : 0;
  const TensorType& w = c.inputs[1];
  const std::int64_t scratch =
      linearCrossEntropyProductScratch(c.inputs[2].numel(), ir::getInt(c.attrs, "chunks").value_or(1), w.shape[1],
                                       w.shape[0], c.inputs.size() > 3, c.inputs[0].dtype, c.kernelThreads);
  return ir::rules::saturatingAdd(portable, scratch);
}

}  // namespace gradc::runtime::host
