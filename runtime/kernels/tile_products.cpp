// Register-blocked small products: see tile_products.h.
//
// The loop nest, for one block of MR rows of C and NV vectors (of W lanes) of its columns:
//     acc[MR][NV] = 0
//     for p < k:  b[v] = B[p, v W .. v W + W)  for v < NV
//                 acc[r][v] += A(r, p) b[v]    for r < MR, v < NV  (A(r, p) broadcast)
//     C[r, v W ..] = alpha acc[r][v] (+ C[r, v W ..])
// AVX-512 takes MR = 6, NV = 4 (24 accumulators, 4 B vectors and a broadcast in its 32
// registers; 64 columns), AVX2 MR = 4, NV = 2 (of its 16). Rows left over take a block of
// fewer rows, whole vectors left over a block of fewer vectors, and the last n mod W columns one
// vector block over a zero-padded copy of them (leftoverColumns). The templates are forced inline into one function per instruction set
// (`target` attributes), so each compiles its own vector code; the vector types are GCC's
// and Clang's vector extensions, and this file is built with FMA contraction (sources.cmake),
// so acc += a b is one fused multiply-add.
#include "runtime/kernels/tile_products.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace gradc::runtime::tiles {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
namespace {

#define GRADC_INLINE inline __attribute__((always_inline))

typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec8 __attribute__((vector_size(32)));

// The operands of one product, op(B) already row-major [k, n] (ldb).
struct Operands {
  const float* A;
  std::int64_t aRow, aCol;  // A(i, p) = A[i aRow + p aCol]
  const float* B;
  std::int64_t ldb;
  float* C;
  std::int64_t ldc;
  std::int64_t k;
  float alpha;
  bool accumulate;
};

template <class V>
inline constexpr int kLanesOf = static_cast<int>(sizeof(V) / sizeof(float));

// Unaligned loads and stores (vectors by reference: no vector crosses a call boundary).
template <class V>
GRADC_INLINE void load(V& v, const float* p) {
  __builtin_memcpy(&v, p, sizeof v);
}
template <class V>
GRADC_INLINE void store(float* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof v);
}

// C rows [i, i + MR) x columns [j, j + NV W).
template <class V, int MR, int NV>
GRADC_INLINE void block(const Operands& o, std::int64_t i, std::int64_t j) {
  constexpr int W = kLanesOf<V>;
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  const float* a = o.A + i * o.aRow;
  const float* b = o.B + j;
  for (std::int64_t p = 0; p < o.k; ++p, b += o.ldb, a += o.aCol) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) load(bv[v], b + v * W);
    for (int r = 0; r < MR; ++r) {
      const float s = a[r * o.aRow];
      for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      float* c = o.C + (i + r) * o.ldc + j + v * W;
      V result = acc[r][v] * o.alpha;
      if (o.accumulate) {
        V old;
        load(old, c);
        result += old;
      }
      store(c, result);
    }
}

// The last `rows` (< MR) rows from i, NV vectors from j.
template <class V, int MR, int NV>
GRADC_INLINE void leftoverRows(const Operands& o, std::int64_t i, std::int64_t j, std::int64_t rows) {
  if constexpr (MR > 1) {
    if (rows == MR - 1)
      block<V, MR - 1, NV>(o, i, j);
    else
      leftoverRows<V, MR - 1, NV>(o, i, j, rows);
  }
}

// Rows [0, m) x NV vectors from column j.
template <class V, int MR, int NV>
GRADC_INLINE void columnPanel(const Operands& o, std::int64_t m, std::int64_t j) {
  std::int64_t i = 0;
  for (; i + MR <= m; i += MR) block<V, MR, NV>(o, i, j);
  if (i < m) leftoverRows<V, MR, NV>(o, i, j, m - i);
}

// Whole vectors left over (< NV) from column j.
template <class V, int MR, int NV>
GRADC_INLINE void leftoverVectors(const Operands& o, std::int64_t m, std::int64_t j, std::int64_t vectors) {
  if constexpr (NV > 1) {
    if (vectors == NV - 1)
      columnPanel<V, MR, NV - 1>(o, m, j);
    else
      leftoverVectors<V, MR, NV - 1>(o, m, j, vectors);
  }
}

// The stack buffers: B's last columns padded to a vector, and op(B) = B^T transposed, at most
// kPanelRows of k at a time (kPanelRows x kPanelColumns floats: 32 KiB).
constexpr std::int64_t kPanelRows = 128, kPanelColumns = 64;

// The columns [j0, n) after the last whole vector (fewer than W): copied, zero-padded to one
// vector, into a strip [kc, W]; each block of rows computes into a [MR, W] buffer whose first
// n - j0 columns are then written to C.
template <class V, int MR>
GRADC_INLINE void leftoverColumns(const Operands& o, std::int64_t m, std::int64_t j0, std::int64_t n) {
  constexpr int W = kLanesOf<V>;
  alignas(64) float strip[kPanelRows * W];
  alignas(64) float rowsOut[MR * W];
  const std::int64_t width = n - j0;
  for (std::int64_t p0 = 0; p0 < o.k; p0 += kPanelRows) {
    const std::int64_t kc = std::min(kPanelRows, o.k - p0);
    for (std::int64_t p = 0; p < kc; ++p)
      for (int c = 0; c < W; ++c) strip[p * W + c] = c < width ? o.B[(p0 + p) * o.ldb + j0 + c] : 0.0f;
    const bool accumulate = o.accumulate || p0 > 0;
    for (std::int64_t i0 = 0; i0 < m; i0 += MR) {
      const std::int64_t rows = std::min<std::int64_t>(MR, m - i0);
      const Operands t{o.A + i0 * o.aRow + p0 * o.aCol, o.aRow, o.aCol, strip, W, rowsOut, W, kc, o.alpha, false};
      leftoverRows<V, MR + 1, 1>(t, 0, 0, rows);
      for (std::int64_t r = 0; r < rows; ++r) {
        float* c = o.C + (i0 + r) * o.ldc + j0;
        for (std::int64_t e = 0; e < width; ++e) c[e] = accumulate ? c[e] + rowsOut[r * W + e] : rowsOut[r * W + e];
      }
    }
  }
}

template <class V, int MR, int NV>
GRADC_INLINE void productOf(const Operands& o, std::int64_t m, std::int64_t n) {
  constexpr int W = kLanesOf<V>;
  std::int64_t j = 0;
  for (; j + NV * W <= n; j += NV * W) columnPanel<V, MR, NV>(o, m, j);
  const std::int64_t vectors = (n - j) / W;
  if (vectors > 0) {
    leftoverVectors<V, MR, NV>(o, m, j, vectors);
    j += vectors * W;
  }
  if (j < n) leftoverColumns<V, MR>(o, m, j, n);
}

// ---- op(B) = B^T ------------------------------------------------------------------------------

// Swaps the off-diagonal D x D blocks of the 2D x 2D blocks that rows a and b (b = a + D) cross:
// applied for every D = W/2, ..., 1 and every such row pair, a W x W block is transposed.
template <class V, int D, std::size_t... J>
GRADC_INLINE void swapBlocks(V& a, V& b, std::index_sequence<J...>) {
  constexpr int W = kLanesOf<V>;
  const V lo = __builtin_shufflevector(a, b, ((J & D) ? W + J - D : J)...);
  const V hi = __builtin_shufflevector(a, b, ((J & D) ? W + J : J + D)...);
  a = lo;
  b = hi;
}
template <class V, int D>
GRADC_INLINE void swapLevel(V* r) {
  constexpr int W = kLanesOf<V>;
  for (int i = 0; i < W; ++i)
    if ((i & D) == 0) swapBlocks<V, D>(r[i], r[i + D], std::make_index_sequence<W>{});
  if constexpr (D > 1) swapLevel<V, D / 2>(r);
}

// panel[p, jj] = B[j0 + jj, p0 + p] for p < kc, jj < nc: W x W blocks through registers, the
// edges one element at a time.
template <class V>
GRADC_INLINE void packTransposed(const float* B, std::int64_t ldb, std::int64_t j0, std::int64_t nc, std::int64_t p0,
                                 std::int64_t kc, float* panel) {
  constexpr int W = kLanesOf<V>;
  std::int64_t jj = 0;
  for (; jj + W <= nc; jj += W) {
    std::int64_t p = 0;
    for (; p + W <= kc; p += W) {
      V r[W];
      for (int i = 0; i < W; ++i) load(r[i], B + (j0 + jj + i) * ldb + p0 + p);
      swapLevel<V, W / 2>(r);
      for (int i = 0; i < W; ++i) store(panel + (p + i) * nc + jj, r[i]);
    }
    for (; p < kc; ++p)
      for (int i = 0; i < W; ++i) panel[p * nc + jj + i] = B[(j0 + jj + i) * ldb + p0 + p];
  }
  for (; jj < nc; ++jj)
    for (std::int64_t p = 0; p < kc; ++p) panel[p * nc + jj] = B[(j0 + jj) * ldb + p0 + p];
}

// C = alpha A op(B) (+ C) with op(B) = B^T: kPanelColumns of op(B)'s columns by kPanelRows of
// its rows at a time, transposed into a panel on the stack, then multiplied as above
// (accumulating after the first k-panel).
template <class V, int MR, int NV>
GRADC_INLINE void productTransposedB(const Operands& o, std::int64_t m, std::int64_t n) {
  alignas(64) float panel[kPanelRows * kPanelColumns];
  for (std::int64_t j0 = 0; j0 < n; j0 += kPanelColumns) {
    const std::int64_t nc = std::min(kPanelColumns, n - j0);
    for (std::int64_t p0 = 0; p0 < o.k; p0 += kPanelRows) {
      const std::int64_t kc = std::min(kPanelRows, o.k - p0);
      packTransposed<V>(o.B, o.ldb, j0, nc, p0, kc, panel);
      const Operands chunk{o.A + p0 * o.aCol, o.aRow, o.aCol, panel, nc, o.C + j0, o.ldc, kc, o.alpha,
                           o.accumulate || p0 > 0};
      productOf<V, MR, NV>(chunk, m, nc);
    }
  }
}

// ---- op(A) = A^T with a long sum ----------------------------------------------------------------

// A^T's elements of one row block lie a whole row of A apart along k: a block of MR rows reads
// MR floats from each of k cache lines (and, with rows of a few KiB, as many pages). So rows are
// taken kPackedRows at a time and k kPackedTerms at a time, and that [kc, rows] piece of A is
// copied into a panel on the stack (row by row: each of A's rows holds it contiguously), which
// every column panel of C then reads from the core's nearest caches; each panel of B is then
// reused by 16 blocks of rows. Each element of C still sums its terms in order, accumulating
// onto C after every kPackedTerms. (gpt-mini's weight gradients, one thread, AVX-512: 142-150
// GFLOP/s reading A^T in place, 145-152 with 48-row panels, 164-176 with 96 to 144 rows.)
constexpr std::int64_t kPackedRows = 96, kPackedTerms = 256;  // 96 KiB
// Shorter sums (an LSTM step's weight gradient, k = batch; mlp's at batch 64) read A^T in place.
constexpr std::int64_t kPackedMinTerms = 256;

template <class V, int MR, int NV>
GRADC_INLINE void productTransposedA(const Operands& o, std::int64_t m, std::int64_t n) {
  alignas(64) float panel[kPackedRows * kPackedTerms];
  const std::int64_t lda = o.aCol;  // A(i, p) = A[i + p lda]
  for (std::int64_t i0 = 0; i0 < m; i0 += kPackedRows) {
    const std::int64_t rows = std::min(kPackedRows, m - i0);
    for (std::int64_t p0 = 0; p0 < o.k; p0 += kPackedTerms) {
      const std::int64_t kc = std::min(kPackedTerms, o.k - p0);
      for (std::int64_t p = 0; p < kc; ++p) std::copy_n(o.A + (p0 + p) * lda + i0, rows, panel + p * rows);
      const Operands chunk{panel, 1, rows, o.B + p0 * o.ldb, o.ldb, o.C + i0 * o.ldc, o.ldc, kc, o.alpha,
                           o.accumulate || p0 > 0};
      productOf<V, MR, NV>(chunk, rows, n);
    }
  }
}

template <class V, int MR, int NV>
GRADC_INLINE void run(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                      const float* A, std::int64_t lda, const float* B, std::int64_t ldb, bool accumulate, float* C,
                      std::int64_t ldc) {
  if (k == 0) {  // an empty sum: C = 0, or C unchanged
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, 0.0f);
    return;
  }
  const Operands o{A, transA ? 1 : lda, transA ? lda : 1, B, ldb, C, ldc, k, alpha, accumulate};
  if (transB)
    productTransposedB<V, MR, NV>(o, m, n);
  else if (transA && k >= kPackedMinTerms && m > MR)
    productTransposedA<V, MR, NV>(o, m, n);
  else
    productOf<V, MR, NV>(o, m, n);
}

using ProductFn = void (*)(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                           const float*, std::int64_t, bool, float*, std::int64_t);

__attribute__((target("arch=x86-64-v4"))) void productAvx512(bool transA, bool transB, std::int64_t m,
                                                            std::int64_t n, std::int64_t k, float alpha,
                                                            const float* A, std::int64_t lda, const float* B,
                                                            std::int64_t ldb, bool accumulate, float* C,
                                                            std::int64_t ldc) {
  run<Vec16, 6, 4>(transA, transB, m, n, k, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

__attribute__((target("arch=x86-64-v3"))) void productAvx2(bool transA, bool transB, std::int64_t m, std::int64_t n,
                                                          std::int64_t k, float alpha, const float* A,
                                                          std::int64_t lda, const float* B, std::int64_t ldb,
                                                          bool accumulate, float* C, std::int64_t ldc) {
  run<Vec8, 4, 2>(transA, transB, m, n, k, alpha, A, lda, B, ldb, accumulate, C, ldc);
}

bool cpuHas(InstructionSet isa) {
  __builtin_cpu_init();
  switch (isa) {
    case InstructionSet::kAvx512:
      return __builtin_cpu_supports("x86-64-v4");
    case InstructionSet::kAvx2:
      return __builtin_cpu_supports("x86-64-v3");
    case InstructionSet::kNone:
      break;
  }
  return false;
}

ProductFn kernelFor(InstructionSet isa) {
  switch (isa) {
    case InstructionSet::kAvx512:
      return productAvx512;
    case InstructionSet::kAvx2:
      return productAvx2;
    case InstructionSet::kNone:
      break;
  }
  return nullptr;
}

// The best the CPU has, at most GRADC_TILE_KERNELS's (avx2 or none), so that an AVX-512 machine
// can run what an AVX2 one runs.
InstructionSet chooseBest() {
  const std::string_view cap = std::getenv("GRADC_TILE_KERNELS") ? std::getenv("GRADC_TILE_KERNELS") : "";
  if (cap == "none") return InstructionSet::kNone;
  if (cap != "avx2" && cpuHas(InstructionSet::kAvx512)) return InstructionSet::kAvx512;
  return cpuHas(InstructionSet::kAvx2) ? InstructionSet::kAvx2 : InstructionSet::kNone;
}

}  // namespace

InstructionSet bestInstructionSet() {
  static const InstructionSet best = chooseBest();
  return best;
}

bool productOn(InstructionSet isa, bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb, bool accumulate,
               float* C, std::int64_t ldc) {
  if (isa == InstructionSet::kNone || !cpuHas(isa)) return false;
  if (m > 0 && n > 0) kernelFor(isa)(transA, transB, m, n, k, alpha, A, lda, B, ldb, accumulate, C, ldc);
  return true;
}

bool product(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* A,
             std::int64_t lda, const float* B, std::int64_t ldb, bool accumulate, float* C, std::int64_t ldc) {
  static const ProductFn best = kernelFor(bestInstructionSet());
  if (best == nullptr) return false;
  if (m > 0 && n > 0) best(transA, transB, m, n, k, alpha, A, lda, B, ldb, accumulate, C, ldc);
  return true;
}

#else

InstructionSet bestInstructionSet() { return InstructionSet::kNone; }

bool productOn(InstructionSet, bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
               std::int64_t, const float*, std::int64_t, bool, float*, std::int64_t) {
  return false;
}

bool product(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t, const float*,
             std::int64_t, bool, float*, std::int64_t) {
  return false;
}

#endif

const char* nameOf(InstructionSet isa) {
  switch (isa) {
    case InstructionSet::kAvx512:
      return "avx512";
    case InstructionSet::kAvx2:
      return "avx2";
    case InstructionSet::kNone:
      break;
  }
  return "none";
}

}  // namespace gradc::runtime::tiles
