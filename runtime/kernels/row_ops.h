// Vector loops over rows for the host's own kernels: the reductions and elementwise passes over
// one row of a tiled attention kernel's scores (runtime/kernels/kernels_attention.cpp), layer
// norm's rows forward and backward (runtime/kernels/kernels_layer_norm.cpp), and softmax's and
// log-softmax's (runtime/kernels/kernels_softmax.cpp).
//
// The attention kernels spend their time between the tile products on rows of 64-256 scores;
// written as plain loops those run one element after another (a sum is a chain of dependent
// adds, and the library's baseline is SSE2). Here each reduction keeps kLanes partial results, combined in
// a fixed order at the end, so the compiler turns it into vector code, and each function is
// compiled for AVX-512, AVX2 + FMA and the baseline, the best one chosen when the library loads
// (row_ops.cpp). The partial results make a row's sum differ from a left-to-right sum by
// rounding only; one machine always gives the same bits (recompute stays bit-identical).
#pragma once

#include <algorithm>
#include <cstdint>

namespace gradc::runtime::rows {

inline constexpr int kLanes = 16;

// Rows of length d per intra-op task of the kernels that loop over rows: about 16 K elements.
inline std::int64_t rowsPerTask(std::int64_t d) { return std::max<std::int64_t>(1, (std::int64_t{1} << 14) / d); }

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

// Layer norm of one row x[d] (two passes: the mean, then the mean square deviation):
// y = (x - mean) rstd w + b with rstd = 1 / sqrt(var + eps); returns {mean, rstd}.
template <class T>
struct Moments {
  T mean, rstd;
};
Moments<float> layerNorm(const float* x, const float* w, const float* b, float* y, std::int64_t d, float eps);
Moments<double> layerNorm(const double* x, const double* w, const double* b, double* y, std::int64_t d, double eps);

// Its backward for one row: with xhat = (x - mean) rstd and g = dy w,
// dx = rstd (g - mean(g) - xhat mean(g xhat)); gw[c] += dy[c] xhat[c] and gb[c] += dy[c].
void layerNormBackward(const float* dy, const float* x, float mean, float rstd, const float* w, float* dx, float* gw,
                       float* gb, std::int64_t d);
void layerNormBackward(const double* dy, const double* x, double mean, double rstd, const double* w, double* dx,
                       double* gw, double* gb, std::int64_t d);

// Softmax of one row: y = e^(x - max) / sum; log-softmax: y = x - max - log(sum of e^(x - max)).
void softmax(const float* x, float* y, std::int64_t d);
void softmax(const double* x, double* y, std::int64_t d);
void logSoftmax(const float* x, float* y, std::int64_t d);
void logSoftmax(const double* x, double* y, std::int64_t d);

// Their backwards from the forward's result y and the gradient g: softmax
// out = y (g - sum(g y)); log-softmax out = g - e^y sum(g).
void softmaxBackward(const float* g, const float* y, float* out, std::int64_t d);
void softmaxBackward(const double* g, const double* y, double* out, std::int64_t d);
void logSoftmaxBackward(const float* g, const float* y, float* out, std::int64_t d);
void logSoftmaxBackward(const double* g, const double* y, double* out, std::int64_t d);

}  // namespace gradc::runtime::rows
