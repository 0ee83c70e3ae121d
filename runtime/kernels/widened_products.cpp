// bf16 and f16 products computed in f32 (see widened_products.h and ir/widened_products.h).
#include "runtime/kernels/widened_products.h"

#include <ATen/Parallel.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>

#include "ir/widened_products.h"
#include "runtime/kernels/tile_products.h"

namespace gradc::runtime {
namespace {

inline float widen(c10::BFloat16 x) {
  const std::uint32_t bits = static_cast<std::uint32_t>(x.x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline float widen(c10::Half x) { return static_cast<float>(x); }

// A [rows x cols] piece of an operand, from element (i0, j0) of matrix `base`, widened into a
// dense panel. The panel keeps the operand's fast axis fast: row-major [rows, cols] (ld cols)
// when the operand's columns are adjacent, else column-major, i.e. its transpose [cols, rows]
// row-major (ld rows); so each run of the copy is a contiguous read and write.
struct Panel {
  const float* data;
  bool transposed;
  std::int64_t ld;
};

template <class T>
Panel widenPiece(const T* base, const WidenedOperand& l, std::int64_t i0, std::int64_t j0, std::int64_t rows,
                 std::int64_t cols, float* panel) {
  const T* src = base + i0 * l.rowStride + j0 * l.colStride;
  if (l.colStride == 1 || rows == 1) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* s = src + i * l.rowStride;
      float* d = panel + i * cols;
      for (std::int64_t j = 0; j < cols; ++j) d[j] = widen(s[j * l.colStride]);
    }
    return {panel, false, cols};
  }
  if (l.rowStride == 1 || cols == 1) {
    for (std::int64_t j = 0; j < cols; ++j) {
      const T* s = src + j * l.colStride;
      float* d = panel + j * rows;
      for (std::int64_t i = 0; i < rows; ++i) d[i] = widen(s[i * l.rowStride]);
    }
    return {panel, true, rows};
  }
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) panel[i * cols + j] = widen(src[i * l.rowStride + j * l.colStride]);
  return {panel, false, cols};
}

// Columns a column-major bf16 piece is transposed by at a time: each row of the panel is written
// 16 floats (one cache line) at a time while 16 columns of the source are read in step.
constexpr std::int64_t kTransposeColumns = 16;

// bf16 (every bundled model's low-precision dtype): the row-major case is a plain loop the
// compiler vectorises, and a column-major piece is transposed while it is widened, so that the
// tile kernels read both panels row-major (their fastest case: transposed operands would be
// copied into stack panels once more).
template <>
Panel widenPiece<c10::BFloat16>(const c10::BFloat16* base, const WidenedOperand& l, std::int64_t i0, std::int64_t j0,
                                std::int64_t rows, std::int64_t cols, float* panel) {
  const auto* src = reinterpret_cast<const std::uint16_t*>(base + i0 * l.rowStride + j0 * l.colStride);
  auto* out = reinterpret_cast<std::uint32_t*>(panel);
  if (l.colStride == 1) {
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::uint16_t* s = src + i * l.rowStride;
      std::uint32_t* d = out + i * cols;
      for (std::int64_t j = 0; j < cols; ++j) d[j] = static_cast<std::uint32_t>(s[j]) << 16;
    }
    return {panel, false, cols};
  }
  if (l.rowStride == 1) {  // transposed while widened, kTransposeColumns columns at a time
    for (std::int64_t j0 = 0; j0 < cols; j0 += kTransposeColumns) {
      const std::int64_t width = std::min(kTransposeColumns, cols - j0);
      for (std::int64_t i = 0; i < rows; ++i) {
        std::uint32_t* d = out + i * cols + j0;
        const std::uint16_t* s = src + j0 * l.colStride + i;
        for (std::int64_t j = 0; j < width; ++j) d[j] = static_cast<std::uint32_t>(s[j * l.colStride]) << 16;
      }
    }
    return {panel, false, cols};
  }
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      out[i * cols + j] = static_cast<std::uint32_t>(src[i * l.rowStride + j * l.colStride]) << 16;
  return {panel, false, cols};
}

// acc[rows, cols] += op(A) op(B) (or = when !accumulate) in f32: the tile kernels, whose sums
// run in a fixed order whatever the thread count; the BLAS on a CPU they have no kernel for.
// (On AVX2 code paths OpenBLAS's Haswell kernels were no clear winner for the blocks, and gave
// different bits on 1 and 2 threads: bench/results/bf16_products.md.)
void productF32(const Panel& a, const Panel& b, std::int64_t rows, std::int64_t cols, std::int64_t terms,
                bool accumulate, float* acc) {
  if (tiles::product(a.transposed, b.transposed, rows, cols, terms, 1.0f, a.data, a.ld, b.data, b.ld, accumulate,
                     acc, cols))
    return;
  const auto view = [](const Panel& p, std::int64_t r, std::int64_t c) {
    float* data = const_cast<float*>(p.data);
    return p.transposed ? at::from_blob(data, {r, c}, {1, p.ld}) : at::from_blob(data, {r, c}, {p.ld, 1});
  };
  at::Tensor out = at::from_blob(acc, {rows, cols});
  if (accumulate)
    out.addmm_(view(a, rows, terms), view(b, terms, cols));
  else
    at::mm_out(out, view(a, rows, terms), view(b, terms, cols));
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
        for (std::int64_t i = 0; i < rows; ++i) {
          float* row = acc + i * cols;
          if (p.accumulate)
            for (std::int64_t j = 0; j < cols; ++j) row[j] = widen(c[i * p.ldc + j]);
          else if (bias != nullptr)
            for (std::int64_t j = 0; j < cols; ++j) row[j] = widen(bias[j0 + j]);
        }
        const T* a = A + product * p.a.batchStride;
        const T* b = B + product * p.b.batchStride;
        for (std::int64_t p0 = 0; p0 < p.k; p0 += blocking.terms) {
          const std::int64_t terms = std::min(blocking.terms, p.k - p0);
          const Panel pa = widenPiece(a, p.a, i0, p0, rows, terms, aPanel);
          const Panel pb = widenPiece(b, p.b, p0, j0, terms, cols, bPanel);
          productF32(pa, pb, rows, cols, terms, started, acc);
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
