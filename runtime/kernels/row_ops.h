// Row primitives of the host's tiled attention kernels (runtime/kernels/kernels_attention.cpp):
// the reductions and elementwise passes over one row of a score tile.
//
// The kernels spend their time between the tile products on rows of 64-256 scores; written as
// plain loops those run one element after another (a sum is a chain of dependent adds, and the
// library's baseline is SSE2). Here each reduction keeps kLanes partial results, combined in
// a fixed order at the end, so the compiler turns it into vector code, and each function is
// compiled for AVX-512, AVX2 + FMA and the baseline, the best one chosen when the library loads
// (row_ops.cpp). The partial results make a row's sum differ from a left-to-right sum by
// rounding only; one machine always gives the same bits (recompute stays bit-identical).
#pragma once

#include <cstdint>

namespace gradc::runtime::rows {

inline constexpr int kLanes = 16;

// max(x[0..n)); -inf for n == 0.
float max(const float* x, std::int64_t n);
double max(const double* x, std::int64_t n);

// x[c] = e^(x[c] - shift) for c < n; returns the sum of the new values. f32 uses a vectorisable
// exp (Cephes' expf polynomial, about 1 ulp); f64 the C library's.
float expShiftedSum(float* x, std::int64_t n, float shift);
double expShiftedSum(double* x, std::int64_t n, double shift);

// x[c] = e^(x[c] - shift) for c < n.
void expShifted(float* x, std::int64_t n, float shift);
void expShifted(double* x, std::int64_t n, double shift);

// x[c] *= factor for c < n.
void scale(float* x, std::int64_t n, float factor);
void scale(double* x, std::int64_t n, double factor);

// sum of a[c] * b[c] for c < n.
float dot(const float* a, const float* b, std::int64_t n);
double dot(const double* a, const double* b, std::int64_t n);

// p[c] *= d[c] - shift for c < n (the softmax backward's ds = p (dp - rowsum(dO * O))).
void mulShifted(float* p, const float* d, std::int64_t n, float shift);
void mulShifted(double* p, const double* d, std::int64_t n, double shift);

}  // namespace gradc::runtime::rows
