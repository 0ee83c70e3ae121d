// Small dense f32 products for the host's tiled kernels (the fused attention's tiles,
// runtime/kernels/kernels_attention.cpp): at most a few hundred rows and columns, operands
// already in the thread's cache.
//
// At these sizes a BLAS spends much of each call packing operands and choosing kernels, and the
// build the process links may be held to an older instruction set (OPENBLAS_CORETYPE): on the
// attention tiles of gpt-mini OpenBLAS's Haswell kernels ran at about half of their large-product
// rate. Here each product is one register-blocked loop: a block of C's rows x vectors of columns
// stays in registers while k runs; A's elements are broadcast from wherever they lie (op(A) =
// A^T over a long sum, a weight gradient's, is first copied 96 rows by 256 terms at a time into
// a panel on the stack, so its elements are not gathered from a cache line per term), B is read
// row by row (op(B) = B^T is first transposed, a k-panel at a time, into a buffer on the stack). Compiled for AVX-512 and for AVX2 + FMA, the best chosen once per
// process; on other CPUs `product` declines and the caller uses its BLAS.
//
// Sums over k run in order within each element (no partial sums): the same operands always give
// the same bits on one machine, so recompute stays bit-identical.
#pragma once

#include <cstdint>

namespace gradc::runtime::tiles {

enum class InstructionSet { kNone, kAvx2, kAvx512 };

// The best instruction set `product` has a kernel for on this CPU (kNone: it always declines);
// GRADC_TILE_KERNELS=avx2 or =none caps it (to run an AVX2 machine's kernels on an AVX-512 one).
InstructionSet bestInstructionSet();
const char* nameOf(InstructionSet isa);  // "none", "avx2", "avx512"

// C[m, n] = alpha op(A) op(B), plus C's old value when `accumulate`; all row-major with leading
// dimensions lda, ldb, ldc; op(A) is [m, k], op(B) is [k, n]; C does not overlap A or B.
// Returns false, touching nothing, when this CPU has no vector kernel for it.
bool product(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* A,
             std::int64_t lda, const float* B, std::int64_t ldb, bool accumulate, float* C, std::int64_t ldc);

// The same on the kernel for `isa` (so tests reach every kernel the CPU can run); false when
// the CPU lacks that instruction set or isa is kNone.
bool productOn(InstructionSet isa, bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb, bool accumulate,
               float* C, std::int64_t ldc);

}  // namespace gradc::runtime::tiles
