// Workspace rules of the matrix products (matmul, linear, linear_weight_grad) in bf16 and f16,
// whose host kernels take their temporaries from the plan (runtime/kernels/low_precision_products.h)
// on one of two routes, the one onednn::bf16Route() names for this process:
//  - bf16 on oneDNN (a CPU with bf16 instructions): oneDNN's scratchpad of packed operand panels,
//    per thread, sized by the CPU's instruction set and cache blocking. The declared bytes are
//    oneDNN's own answer for the largest of the layouts the kernel may be given, so a plan holds
//    every layout's scratchpad and the kernel's allocation equals the plan.
//  - widened to f32 (bf16 elsewhere, f16 everywhere): each task's f32 panels
//    (ir/widened_products.h), a function of the shapes and the thread count alone.
// In f32 and f64 the products run on the BLAS or the tile kernels, which allocate nothing.
#include "ir/op_rules.h"
#include "ir/widened_products.h"
#include "onednn/gemm.h"

namespace gradc::ir::rules {

namespace {

bool lowPrecision(const TensorType& t) { return t.dtype == DType::bf16 || t.dtype == DType::f16; }

}  // namespace

std::int64_t productWorkspace(const onednn::ProductShape& s, DType dtype, int threads) {
  if (dtype == DType::bf16 && onednn::bf16Route() == onednn::Bf16Route::kOneDnn)
    return onednn::scratchpadBound(s, threads);
  if (dtype != DType::bf16 && dtype != DType::f16) return 0;
  return widenedBlocking(s.batched ? s.batch : 1, s.m, s.k, s.n, threads).bytes();
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
  auto batchOf = [](const Shape& s) { return checkedNumel(Shape(s.begin(), s.end() - 2)).value_or(1); };
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

}  // namespace gradc::ir::rules
