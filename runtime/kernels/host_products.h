// f32 matrix products on the host's tile kernels (runtime/kernels/tile_products.h) instead of the
// BLAS, where they run faster:
//  - small products, always: few rows (a linear layer applied to one time step of a small batch:
//    the LSTM's [8, 256] x [256, 1024] per step) or few terms (the weight gradient of such a
//    step, [1024, 8] x [8, 256]). There OpenBLAS spends much of each call packing: its Haswell
//    kernels ran 48-105 GFLOP/s on such shapes on this project's machine, one thread, against
//    the tile kernels' 94-219 (bench/results/host_products.md).
//  - large products too when the tile kernels have AVX-512 and the BLAS's kernels do not (an
//    OpenBLAS core below SkylakeX: Haswell, Zen, ..., as OPENBLAS_CORETYPE can impose on any
//    CPU, or as a release that does not know the CPU picks). On gpt-mini's products the tile
//    kernels ran 123-186 GFLOP/s there against OpenBLAS Haswell's 91-94; against OpenBLAS's own
//    AVX-512 kernels (Cooperlake: 165-190) they are no faster, so with those, or with a BLAS
//    gradc cannot name, large products stay on the BLAS.
// GRADC_HOST_PRODUCTS=blas sends every product that is not small to the BLAS, =tiles every one
// to the tile kernels (both for comparisons); unset, the rule above decides.
//
// Sums of more than kTermBlock * 2 terms run in blocks of kTermBlock terms, each block
// accumulated onto C in order, so B's panel stays in the core's L2 (A transposed with 2,048
// terms ran 110-120 GFLOP/s unblocked, 145-180 in blocks of 512). The work is split over the
// intra-op threads by blocks of rows or columns of the result (each a product of its own, with
// no shared output), and each element's sum runs in the same order whatever the split, so the
// result does not depend on the thread count. Nothing is allocated (the kernels' transposition
// panels live on the stack), so these products hold no memory beside the arena either.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/kernels/tile_products.h"

namespace gradc::runtime {

// The most rows (or terms) of a product that always runs on the tile kernels.
inline constexpr std::int64_t kSmallProductExtent = 64;
// Terms per block of a long sum.
inline constexpr std::int64_t kTermBlock = 512;

// Whether products larger than kSmallProductExtent run on the tile kernels in this process: the
// rule above, decided once from this CPU, the BLAS and GRADC_HOST_PRODUCTS.
bool largeProductsOnTiles();
// The rule itself: the tile kernels' instruction set, the OpenBLAS core (nullopt: another BLAS)
// and GRADC_HOST_PRODUCTS's value (nullptr: unset).
bool largeProductsBelongOnTiles(tiles::InstructionSet tiles, const std::optional<std::string>& openblasCore,
                                const char* forced);

// out[m, n] = a[m, k] @ b[k, n] (+ bias[n]) when every tensor is f32 on the host, out is
// contiguous, a and b each have a unit stride along one axis, and the product is small or
// largeProductsOnTiles(); returns false, touching nothing, otherwise (or when this CPU has no
// tile kernel), and the caller runs the BLAS.
bool hostProduct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias = nullptr);

// The same on the tile kernels whatever the product's size (the conditions on the tensors and
// the CPU still apply).
bool tileProduct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias = nullptr);

}  // namespace gradc::runtime
