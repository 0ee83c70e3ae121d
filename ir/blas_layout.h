// How ATen's matrix products read strided operands: one definition for the planner's storage
// model (passes/memory/storage.cpp, which counts the copies) and the runtime's products
// (runtime/kernels/low_precision_products.cpp, which must copy exactly those).
#pragma once

#include <algorithm>
#include <cstdint>

namespace gradc::ir {

// A matrix a BLAS takes as it is: row- or column-major with a valid leading dimension, or a
// single row or column.
inline bool blasCompatible(std::int64_t rows, std::int64_t cols, std::int64_t rowStride, std::int64_t colStride) {
  return (colStride == 1 && rowStride >= std::max<std::int64_t>(1, cols)) ||
         (rowStride == 1 && colStride >= std::max<std::int64_t>(1, rows)) || rows == 1 || cols == 1;
}

// at::matmul's should_fold for a[..., m, k] (rank ra, `shape` and `strides` its first three
// extents and strides when ra == 3) @ b (rank rb): a folds into [M, k] rows for one mm when b is
// a matrix, except a 3-D operand whose last two axes are transposed under a slowest first axis,
// which runs batched.
inline bool matmulFoldsRows(int ra, int rb, const std::int64_t* shape, const std::int64_t* strides) {
  if (ra < 3 || rb != 2) return false;
  return !(ra == 3 && strides[2] != 1 && strides[0] == shape[1] * shape[2]);
}

}  // namespace gradc::ir
