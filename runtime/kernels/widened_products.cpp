// bf16 and f16 products computed in f32 (see widened_products.h and ir/widened_products.h).
#include "runtime/kernels/widened_products.h"

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>

#include "ir/widened_products.h"
#include "runtime/kernels/tile_products.h"

namespace gradc::runtime {
namespace {

// d[j] = s[j * stride] as f32, j < n. Exact: every bf16 and f16 value is an f32 value. bf16 is
// the upper half of an f32's bits, so a contiguous run is a shift the compiler vectorises.
inline void widenRun(const c10::BFloat16* s, std::int64_t stride, std::int64_t n, float* d) {
  const auto* bits = reinterpret_cast<const std::uint16_t*>(s);
  auto* out = reinterpret_cast<std::uint32_t*>(d);
  if (stride == 1)
    for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<std::uint32_t>(bits[j]) << 16;
  else
    for (std::int64_t j = 0; j < n; ++j) out[j] = static_cast<std::uint32_t>(bits[j * stride]) << 16;
}
inline void widenRun(const c10::Half* s, std::int64_t stride, std::int64_t n, float* d) {
  for (std::int64_t j = 0; j < n; ++j) d[j] = static_cast<float>(s[j * stride]);
}

// Columns a column-major piece is transposed by at a time: each row of the panel is written 16
// floats (one cache line) at a time while 16 columns of the source are read in step.
constexpr std::int64_t kTransposeColumns = 16;

// A [rows x cols] piece of an operand, from element (i0, j0) of matrix `base`, widened into a
// dense row-major panel (ld cols). A column-major piece is transposed while it is widened, so
// the tile kernels read both panels row-major, their fastest case (a transposed operand would be
// copied into a stack panel once more).
template <class T>
void widenPiece(const T* base, const WidenedOperand& l, std::int64_t i0, std::int64_t j0, std::int64_t rows,
                std::int64_t cols, float* panel) {
  const T* src = base + i0 * l.rowStride + j0 * l.colStride;
  if (l.rowStride == 1 && l.colStride != 1 && rows > 1) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTransposeColumns) {
      const std::int64_t width = std::min(kTransposeColumns, cols - c0);
      for (std::int64_t i = 0; i < rows; ++i) widenRun(src + c0 * l.colStride + i, l.colStride, width, panel + i * cols + c0);
    }
    return;
  }
  for (std::int64_t i = 0; i < rows; ++i) widenRun(src + i * l.rowStride, l.colStride, cols, panel + i * cols);
}

// acc[rows, cols] += a[rows, terms] b[terms, cols] (or = when !accumulate) in f32, all row-major:
// the tile kernels, whose sums run in a fixed order whatever the thread count; the BLAS on a CPU
// they have no kernel for. (On AVX2 code paths OpenBLAS's Haswell kernels were no clear winner
// for the blocks, and gave different bits on 1 and 2 threads: bench/results/bf16_products.md.)
void productF32(const float* a, const float* b, std::int64_t rows, std::int64_t cols, std::int64_t terms,
                bool accumulate, float* acc) {
  if (tiles::product(false, false, rows, cols, terms, 1.0f, a, terms, b, cols, accumulate, acc, cols)) return;
  const at::Tensor av = at::from_blob(const_cast<float*>(a), {rows, terms});
  const at::Tensor bv = at::from_blob(const_cast<float*>(b), {terms, cols});
  at::Tensor out = at::from_blob(acc, {rows, cols});
  if (accumulate)
    out.addmm_(av, bv);
  else
    at::mm_out(out, av, bv);
}

template <class T>
void runBlocks(const WidenedProduct& p, const ir::WidenedBlocking& blocking, float* scratch) {
  const T* A = static_cast<const T*>(p.a.data);
  const T* B = static_cast<const T*>(p.b.data);
  const T* bias = static_cast<const T*>(p.bias);
  T* C = static_cast<T*>(p.c);
  const std::int64_t perProduct = blocking.rowBlocks * blocking.columnBlocks;
  at::parallel_for(0, blocking.tasks, 1, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t task = t0; task < t1; ++task) {
      float* aPanel = scratch + task * blocking.panelFloats();
      float* bPanel = aPanel + blocking.rows * blocking.terms;
      float* acc = bPanel + blocking.terms * blocking.columns;
      for (std::int64_t block = task; block < blocking.blocks; block += blocking.tasks) {
        const std::int64_t product = block / perProduct, within = block % perProduct;
        const std::int64_t i0 = within / blocking.columnBlocks * blocking.rows;
        const std::int64_t j0 = within % blocking.columnBlocks * blocking.columns;
        const std::int64_t rows = std::min(blocking.rows, p.m - i0), cols = std::min(blocking.columns, p.n - j0);
        T* c = C + product * p.m * p.ldc + i0 * p.ldc + j0;
        // The accumulator starts as C's old values, the bias, or nothing (the first sum writes it).
        bool started = p.accumulate || bias != nullptr;
        if (started)
          for (std::int64_t i = 0; i < rows; ++i)
            widenRun(p.accumulate ? c + i * p.ldc : bias + j0, 1, cols, acc + i * cols);
        const T* a = A + product * p.a.batchStride;
        const T* b = B + product * p.b.batchStride;
        for (std::int64_t p0 = 0; p0 < p.k; p0 += blocking.terms) {
          const std::int64_t terms = std::min(blocking.terms, p.k - p0);
          widenPiece(a, p.a, i0, p0, rows, terms, aPanel);
          widenPiece(b, p.b, p0, j0, terms, cols, bPanel);
          productF32(aPanel, bPanel, rows, cols, terms, started, acc);
          started = true;
        }
        if (!started) std::fill(acc, acc + rows * cols, 0.0f);  // k == 0: an empty sum
        for (std::int64_t i = 0; i < rows; ++i)
          for (std::int64_t j = 0; j < cols; ++j) c[i * p.ldc + j] = T(acc[i * cols + j]);  // rounded to nearest even
      }
    }
  });
}

}  // namespace

bool runWidenedProduct(const WidenedProduct& p, void* scratch, std::int64_t scratchBytes) {
  if (p.dtype != c10::ScalarType::BFloat16 && p.dtype != c10::ScalarType::Half) return false;
  const ir::WidenedBlocking blocking = ir::widenedBlocking(p.batch, p.m, p.k, p.n, at::get_num_threads());
  if (blocking.bytes() > scratchBytes) return false;
  if (blocking.blocks == 0) return true;
  if (p.dtype == c10::ScalarType::BFloat16)
    runBlocks<c10::BFloat16>(p, blocking, static_cast<float*>(scratch));
  else
    runBlocks<c10::Half>(p, blocking, static_cast<float*>(scratch));
  return true;
}

}  // namespace gradc::runtime
