// f32 products on the tile kernels: see host_products.h.
#include "runtime/kernels/host_products.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "ir/blas_layout.h"
#include "runtime/kernels/blas_kernels.h"
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

// C[m, n] (+)= op(A)[m, k] op(B)[k, n], k in blocks of kTermBlock when it is longer than two
// blocks: the first block accumulates onto C only when `accumulate`, the rest always.
void product(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, const float* A, std::int64_t lda,
             const float* B, std::int64_t ldb, bool accumulate, float* C, std::int64_t ldc) {
  if (k <= 2 * kTermBlock) {
    tiles::product(transA, transB, m, n, k, 1.0f, A, lda, B, ldb, accumulate, C, ldc);
    return;
  }
  for (std::int64_t k0 = 0; k0 < k; k0 += kTermBlock) {
    const std::int64_t terms = std::min(kTermBlock, k - k0);
    const float* Ak = transA ? A + k0 * lda : A + k0;  // op(A)'s columns k0.. (A's rows when transposed)
    const float* Bk = transB ? B + k0 : B + k0 * ldb;  // op(B)'s rows k0..
    tiles::product(transA, transB, m, n, terms, 1.0f, Ak, lda, Bk, ldb, accumulate || k0 > 0, C, ldc);
  }
}

}  // namespace

bool largeProductsBelongOnTiles(tiles::InstructionSet tiles, const std::optional<std::string>& openblasCore,
                                const char* forced) {
  if (forced != nullptr && std::string_view(forced) == "tiles") return tiles != tiles::InstructionSet::kNone;
  if (forced != nullptr && std::string_view(forced) == "blas") return false;
  if (tiles != tiles::InstructionSet::kAvx512) return false;
  if (!openblasCore) return false;  // a BLAS gradc cannot name: assume it has the CPU's best kernels
  const std::optional<int> level = openblasCoreLevel(*openblasCore);
  return level && *level < kOpenblasAvx512Level;
}

bool largeProductsOnTiles() {
  static const bool onTiles =
      largeProductsBelongOnTiles(tiles::bestInstructionSet(), openblasCoreName(), std::getenv("GRADC_HOST_PRODUCTS"));
  return onTiles;
}

bool hostProduct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias) {
  if (a.dim() != 2 || b.dim() != 2) return false;
  if (a.size(0) > kSmallProductExtent && a.size(1) > kSmallProductExtent && !largeProductsOnTiles()) return false;
  return tileProduct(out, a, b, bias);
}

bool tileProduct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias) {
  if (tiles::bestInstructionSet() == tiles::InstructionSet::kNone) return false;
  Layout la, lb;
  if (!layoutOf(a, la) || !layoutOf(b, lb)) return false;
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
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
      product(la.transposed, lb.transposed, i1 - i0, n, k, Ai, la.ld, B, lb.ld, accumulate, C + i0 * n, n);
    });
  } else {  // blocks of C's columns: B's columns (or rows, transposed) from j0
    const std::int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
    const std::int64_t grain = std::max<std::int64_t>(1, kMultiplyAddsPerTask * blocks / work);
    at::parallel_for(0, blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
      const std::int64_t j0 = b0 * kColumnBlock, j1 = std::min(n, b1 * kColumnBlock);
      const float* Bj = B + (lb.transposed ? j0 * lb.ld : j0);
      product(la.transposed, lb.transposed, m, j1 - j0, k, A, la.ld, Bj, lb.ld, accumulate, C + j0, n);
    });
  }
  return true;
}

}  // namespace gradc::runtime
