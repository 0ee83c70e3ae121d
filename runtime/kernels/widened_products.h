// bf16 and f16 matrix products on the host computed in f32: the operands widened to f32 block by
// block, multiplied on the tile kernels (runtime/kernels/tile_products.h; the BLAS on a CPU they
// have no kernel for), accumulated in f32 and rounded once into the result. What runs bf16 products on CPUs
// without bf16 instructions, and f16 products on every CPU (ir/widened_products.h has the
// blocking and why; runtime/kernels/low_precision_products.h decides when).
//
// Shape legend: `batch` products C[p] (m x n) = A[p] (m x k) B[p] (k x n) (+ bias[n]) (+ C[p]).
// The panels live in the caller's scratch, exactly ir::widenedBlocking(...).bytes() of it: the
// node's declared workspace, so measured == planned. Nothing else is allocated.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace gradc::runtime {

// Element (p, i, j) of an operand at data + p batchStride + i rowStride + j colStride (in
// elements); batchStride 0: one matrix shared by every product.
struct WidenedOperand {
  const void* data = nullptr;
  std::int64_t batchStride = 0, rowStride = 0, colStride = 1;
};

struct WidenedProduct {
  c10::ScalarType dtype = c10::ScalarType::BFloat16;  // of A, B, the bias and C: BFloat16 or Half
  std::int64_t batch = 1, m = 0, k = 0, n = 0;
  WidenedOperand a, b;
  const void* bias = nullptr;  // [n], contiguous; null: none
  void* c = nullptr;           // C[p] at c + p m ldc, rows ldc apart, columns contiguous
  std::int64_t ldc = 0;
  bool accumulate = false;     // C[p] += A[p] B[p] (its old value enters the f32 sum)
};

// Runs the product with the calling thread's intra-op threads, its panels in
// [scratch, scratch + scratchBytes). Returns false, writing nothing, when the dtype is not bf16
// or f16 or the scratch is smaller than the blocking needs.
bool runWidenedProduct(const WidenedProduct& product, void* scratch, std::int64_t scratchBytes);

}  // namespace gradc::runtime
