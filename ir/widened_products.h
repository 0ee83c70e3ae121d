// bf16 and f16 matrix products computed in f32: the blocking that the op table's workspace rules
// (runtime/host/host_workspace_products.cpp) and the runtime's kernel (runtime/kernels/widened_products.h) share,
// so the workspace a plan declares is the one the kernel allocates.
//
// Where the CPU has no bf16 instructions (AVX2 machines, AVX-512 without AVX512_BF16) a bf16
// product is computed as an f32 product of the widened operands, accumulated in f32 and rounded
// once into the result: what a bf16 GEMM with f32 accumulation (oneDNN's, cuBLAS's) returns, up
// to the f32 summation order. Widening is exact (a bf16 or f16 value is an f32 value), so the
// only rounding beside the f32 sums is the last one.
//
// Blocking, for C[p] (m x n) = A[p] (m x k) B[p] (k x n), p < batch:
//   the result is cut into blocks of at most kWidenedRows x kWidenedColumns, over every product;
//   each block is computed by one task, in sums of at most kWidenedTerms terms: the task widens
//   A's [rows x terms] piece and B's [terms x columns] piece into its own panels and adds their
//   f32 product onto the block's f32 accumulator (which starts as 0, the bias, or C itself when
//   accumulating); after the last terms the accumulator is rounded into C.
// Each element's sum runs in the same order whatever the number of tasks, so the result does not
// depend on the thread count. A task's panels (A, B and the accumulator, in floats) stay within
// the core's L2 cache; the operands are widened once per block they meet, which costs
// 1 / kWidenedColumns + 1 / kWidenedRows conversions per multiply-add.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gradc::ir {

inline constexpr std::int64_t kWidenedRows = 256;
inline constexpr std::int64_t kWidenedColumns = 256;
inline constexpr std::int64_t kWidenedTerms = 256;

struct WidenedBlocking {
  std::int64_t rows = 0, columns = 0, terms = 0;  // a block's extents (at most the product's)
  std::int64_t rowBlocks = 0, columnBlocks = 0;   // per product
  std::int64_t blocks = 0;                        // over all products
  std::int64_t tasks = 0;                         // min(threads, blocks): each owns one set of panels

  // Floats of one task's panels: A's piece, B's piece, the accumulator.
  std::int64_t panelFloats() const { return rows * terms + terms * columns + rows * columns; }
  std::int64_t panelBytes() const { return panelFloats() * static_cast<std::int64_t>(sizeof(float)); }
  // The workspace: every task's panels, one after the other.
  std::int64_t bytes() const { return tasks * panelBytes(); }
};

// The blocking of `batch` products of [m, k] @ [k, n] run with `threads` intra-op threads. A
// product without results (m, n or batch 0) has no blocks and no workspace.
inline WidenedBlocking widenedBlocking(std::int64_t batch, std::int64_t m, std::int64_t k, std::int64_t n,
                                       int threads) {
  WidenedBlocking b;
  if (batch <= 0 || m <= 0 || n <= 0 || k < 0) return b;
  b.rows = std::min(m, kWidenedRows);
  b.columns = std::min(n, kWidenedColumns);
  b.terms = std::min(k, kWidenedTerms);
  b.rowBlocks = (m + b.rows - 1) / b.rows;
  b.columnBlocks = (n + b.columns - 1) / b.columns;
  b.blocks = batch * b.rowBlocks * b.columnBlocks;
  b.tasks = std::min<std::int64_t>(std::max(threads, 1), b.blocks);
  return b;
}

}  // namespace gradc::ir
