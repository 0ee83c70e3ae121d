// Small products on the tile kernels: see small_products.h.
#include "runtime/kernels/small_products.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "ir/blas_layout.h"
#include "runtime/kernels/tile_products.h"

namespace gradc::runtime {
namespace {

// A 2-D f32 operand as the tile kernels read it: row-major with leading dimension `ld`, or its
// transpose.
struct Layout {
  bool transposed = false;
  std::int64_t ld = 0;
};

// The layout of a 2-D f32 host tensor when a BLAS reads it without a copy (ir::blasCompatible:
// rows or columns apart by at least their length, or a single row or column); false otherwise
// (overlapping rows, a stride on both axes).
bool layoutOf(const at::Tensor& t, Layout& layout) {
  if (t.dim() != 2 || t.scalar_type() != at::kFloat || !t.device().is_cpu()) return false;
  const std::int64_t rowStride = t.stride(0), colStride = t.stride(1);
  if (!ir::blasCompatible(t.size(0), t.size(1), rowStride, colStride)) return false;
  if (colStride == 1 || t.size(1) == 1)
    layout = {false, rowStride};  // element (i, j) at i ld + j
  else
    layout = {true, colStride};  // element (i, j) at i + j ld (row stride 1, or a single row)
  return true;
}

// Multiply-adds per intra-op task: below this a task's start costs more than it saves.
constexpr std::int64_t kMultiplyAddsPerTask = std::int64_t{1} << 19;
// Column blocks are whole register panels of the AVX-512 kernel (64 columns).
constexpr std::int64_t kColumnBlock = 64;

}  // namespace

bool smallProduct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias) {
  if (tiles::bestInstructionSet() == tiles::InstructionSet::kNone) return false;
  Layout la, lb;
  if (!layoutOf(a, la) || !layoutOf(b, lb)) return false;
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m > kSmallProductExtent && k > kSmallProductExtent) return false;
  if (out.scalar_type() != at::kFloat || !out.is_contiguous() || out.dim() != 2 || out.size(0) != m ||
      out.size(1) != n || b.size(0) != k)
    return false;
  if (bias != nullptr && (bias->scalar_type() != at::kFloat || !bias->is_contiguous() || bias->numel() != n))
    return false;
  const float* A = a.data_ptr<float>();
  const float* B = b.data_ptr<float>();
  float* C = out.data_ptr<float>();
  if (bias != nullptr) {  // C's rows start as the bias; the product accumulates onto it
    const float* bd = bias->data_ptr<float>();
    for (std::int64_t i = 0; i < m; ++i) std::copy(bd, bd + n, C + i * n);
  }
  const bool accumulate = bias != nullptr;
  const std::int64_t work = std::max<std::int64_t>(1, m * n * k);
  if (m >= n) {  // blocks of C's rows: A's rows (or columns, transposed) from i0
    const std::int64_t grain = std::max<std::int64_t>(1, kMultiplyAddsPerTask * m / work);
    at::parallel_for(0, m, grain, [&](std::int64_t i0, std::int64_t i1) {
      const float* Ai = A + (la.transposed ? i0 : i0 * la.ld);
      tiles::product(la.transposed, lb.transposed, i1 - i0, n, k, 1.0f, Ai, la.ld, B, lb.ld, accumulate, C + i0 * n, n);
    });
  } else {  // blocks of C's columns: B's columns (or rows, transposed) from j0
    const std::int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
    const std::int64_t grain = std::max<std::int64_t>(1, kMultiplyAddsPerTask * blocks / work);
    at::parallel_for(0, blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
      const std::int64_t j0 = b0 * kColumnBlock, j1 = std::min(n, b1 * kColumnBlock);
      const float* Bj = B + (lb.transposed ? j0 * lb.ld : j0);
      tiles::product(la.transposed, lb.transposed, m, j1 - j0, k, 1.0f, A, la.ld, Bj, lb.ld, accumulate, C + j0, n);
    });
  }
  return true;
}

}  // namespace gradc::runtime
