// f32 matrix products too small for the BLAS to run well, on the tile kernels
// (runtime/kernels/tile_products.h) instead: few rows (a linear layer applied to one time step of
// a small batch: the LSTM's [8, 256] x [256, 1024] per step) or few terms (the weight gradient of
// such a step, [1024, 8] x [8, 256]). There OpenBLAS's Haswell kernels spend much of each call
// packing: 48-105 GFLOP/s on such shapes on this project's machine, one thread, against the
// tile kernels' 94-219 (bench/results/small_products.md). Larger products stay on the BLAS,
// whose cache blocking they need.
//
// The work is split over the intra-op threads by blocks of rows or columns of the result (each
// a product of its own, with no shared output), so the result does not depend on the thread
// count. Nothing is allocated (the kernels' transposition panels live on the stack).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace gradc::runtime {

// The most rows (or terms) of a product that runs on the tile kernels.
inline constexpr std::int64_t kSmallProductExtent = 64;

// out[m, n] = a[m, k] @ b[k, n] (+ bias[n]) when every tensor is f32 on the host, out is
// contiguous, a and b each have a unit stride along one axis, and m or k is at most
// kSmallProductExtent; returns false, touching nothing, otherwise (or when this CPU has no tile
// kernel), and the caller runs the BLAS.
bool smallProduct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias = nullptr);

}  // namespace gradc::runtime
