// Workspace rules of the matrix products (matmul, linear, linear_weight_grad): in bf16, on a CPU
// where oneDNN has a bf16 kernel, the runtime runs them on oneDNN's matmul and hands it a
// scratchpad of exactly the declared bytes (onednn/gemm.h): packed operand panels, per thread,
// sized by the CPU's instruction set and cache blocking. The declared bytes are oneDNN's own
// answer for the largest of the layouts the kernel may be given, so a plan holds every layout's
// scratchpad and the kernel's allocation equals the plan. In f32 and f64 the products run on the
// BLAS, which allocates nothing.
#include "ir/op_rules.h"
#include "onednn/gemm.h"

namespace gradc::ir::rules {

namespace {

bool onOneDnn(const TensorType& t) { return t.dtype == DType::bf16; }

}  // namespace

// Mirrors the kernel's folding (runtime/kernels/kernels_forward.cpp, at::matmul's): [..., m, k] @ [k, n]
// folds into one [M, k] @ [k, n] product, except a transposed 3-D operand, which runs batched
// with B shared; otherwise both operands are broadcast to the common batch and run batched, an
// operand without batch dims shared by every product.
std::int64_t workspaceMatmul(const OpContext& c, std::span<const TensorType> results) {
  const TensorType& a = c.inputs[0];
  const TensorType& b = c.inputs[1];
  if (!onOneDnn(a)) return 0;
  const int ra = a.rank(), rb = b.rank();
  const std::int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  if (ra == 2 && rb == 2) return onednn::scratchpadBound({.m = m, .k = k, .n = n}, c.kernelThreads);
  if (rb == 2) {
    std::int64_t folded = onednn::scratchpadBound({.m = a.numel() / k, .k = k, .n = n}, c.kernelThreads);
    if (ra != 3) return folded;
    onednn::ProductShape transposed{.batch = a.shape[0], .m = m, .k = k, .n = n, .batched = true, .broadcastB = true};
    return std::max(folded, onednn::scratchpadBound(transposed, c.kernelThreads));
  }
  const TensorType& out = results[0];
  // The batch extents' products (of shapes the inference already checked).
  auto batchOf = [](const Shape& s) { return checkedNumel(Shape(s.begin(), s.end() - 2)).value_or(1); };
  const std::int64_t batch = batchOf(out.shape), batchA = batchOf(a.shape), batchB = batchOf(b.shape);
  onednn::ProductShape s{.batch = batch, .m = m, .k = k, .n = n, .batched = true,
                         .broadcastA = batchA == 1, .broadcastB = batchB == 1};
  return onednn::scratchpadBound(s, c.kernelThreads);
}

// x[..., in] @ weight^T over the flattened rows (+ bias).
std::int64_t workspaceLinear(const OpContext& c, std::span<const TensorType>) {
  const TensorType& x = c.inputs[0];
  if (!onOneDnn(x)) return 0;
  const std::int64_t in = x.shape.back(), out = c.inputs[1].shape[0];
  return onednn::scratchpadBound({.m = x.numel() / in, .k = in, .n = out, .bias = c.inputs.size() == 3},
                                 c.kernelThreads);
}

// grad_out^T [out, rows] @ x [rows, in].
std::int64_t workspaceLinearWeightGrad(const OpContext& c, std::span<const TensorType>) {
  const TensorType& g = c.inputs[0];
  const TensorType& x = c.inputs[1];
  if (!onOneDnn(g)) return 0;
  const std::int64_t out = g.shape.back(), in = x.shape.back();
  return onednn::scratchpadBound({.m = out, .k = x.numel() / in, .n = in}, c.kernelThreads);
}

}  // namespace gradc::ir::rules
