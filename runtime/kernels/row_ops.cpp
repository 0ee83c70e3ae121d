// Vector loops over rows for the host's own kernels: see row_ops.h. Each public function is a
// wrapper around one template, cloned per instruction set (vector_math.h); the templates are
// forced inline so every clone compiles its own vector code. This file is built at -O3 without
// trapping math (sources.cmake).
#include "runtime/kernels/row_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/kernels/vector_math.h"

namespace gradc::runtime::rows {
namespace {

GRADC_VECTOR_INLINE double expOf(double x) { return std::exp(x); }
GRADC_VECTOR_INLINE float expOf(float x) { return vmath::expNotAbove(x); }

// The reduction of term(0), ..., term(n - 1) by `op` from `start`: kLanes partial results over
// blocks of kLanes elements (what the compiler turns into vector code), combined in a fixed
// order, then the tail left to right. One loop per call: two reductions in one loop vectorise
// badly.
template <class T, class Term, class Op>
GRADC_VECTOR_INLINE T reduceRow(std::int64_t n, T start, Term term, Op op) {
  T part[kLanes];
  std::fill(part, part + kLanes, start);
  std::int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] = op(part[l], term(c + l));
  T r = start;
  for (int l = 0; l < kLanes; ++l) r = op(r, part[l]);
  for (; c < n; ++c) r = op(r, term(c));
  return r;
}
template <class T, class Term>
GRADC_VECTOR_INLINE T sumRow(std::int64_t n, Term term) {
  return reduceRow(n, T(0), term, [](T a, T b) { return a + b; });
}

template <class T>
GRADC_VECTOR_INLINE T maxOf(const T* x, std::int64_t n) {
  return reduceRow(n, -std::numeric_limits<T>::infinity(), [x](std::int64_t c) { return x[c]; },
                   [](T a, T b) { return b > a ? b : a; });
}

// y[c] = e^(x[c] - shift); returns the sum of the y[c]. In place (y == x) or into a row that
// does not overlap x (Y = T* __restrict), so the compiler needs no overlap check.
// (Its own loop: written as a reduceRow term that also stores, it ran about 6% slower.)
template <class T, class Y = T*>
GRADC_VECTOR_INLINE T expShiftedSumOf(const T* x, Y y, std::int64_t n, T shift) {
  T part[kLanes] = {};
  std::int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      y[c + l] = expOf(x[c + l] - shift);
      part[l] += y[c + l];
    }
  T r = 0;
  for (int l = 0; l < kLanes; ++l) r += part[l];
  for (; c < n; ++c) r += (y[c] = expOf(x[c] - shift));
  return r;
}

template <class T>
GRADC_VECTOR_INLINE T dotOf(const T* a, const T* b, std::int64_t n) {
  return sumRow<T>(n, [&](std::int64_t c) { return a[c] * b[c]; });
}

template <class T>
GRADC_VECTOR_INLINE Moments<T> layerNormOf(const T* __restrict x, const T* __restrict w, const T* __restrict b,
                                    T* __restrict y, std::int64_t d, T eps) {
  const T mean = sumRow<T>(d, [x](std::int64_t c) { return x[c]; }) / static_cast<T>(d);
  const T squares = sumRow<T>(d, [&](std::int64_t c) { return (x[c] - mean) * (x[c] - mean); });
  const T rstd = T(1) / std::sqrt(squares / static_cast<T>(d) + eps);
  for (std::int64_t e = 0; e < d; ++e) y[e] = (x[e] - mean) * rstd * w[e] + b[e];
  return {mean, rstd};
}

template <class T>
GRADC_VECTOR_INLINE void layerNormBackwardOf(const T* __restrict dy, const T* __restrict x, T mean, T rstd,
                                      const T* __restrict w, T* __restrict dx, T* __restrict gw, T* __restrict gb,
                                      std::int64_t d) {
  const T meanG = sumRow<T>(d, [&](std::int64_t c) { return dy[c] * w[c]; }) / static_cast<T>(d);
  const T meanGX =
      sumRow<T>(d, [&](std::int64_t c) { return dy[c] * w[c] * (x[c] - mean); }) * rstd / static_cast<T>(d);
  for (std::int64_t e = 0; e < d; ++e) {
    const T xhat = (x[e] - mean) * rstd;
    dx[e] = rstd * (dy[e] * w[e] - meanG - xhat * meanGX);
    gw[e] += dy[e] * xhat;
    gb[e] += dy[e];
  }
}

template <class T>
GRADC_VECTOR_INLINE void softmaxOf(const T* __restrict x, T* __restrict y, std::int64_t d) {
  const T inverse = T(1) / expShiftedSumOf<T, T* __restrict>(x, y, d, maxOf(x, d));
  for (std::int64_t c = 0; c < d; ++c) y[c] *= inverse;
}

template <class T>
GRADC_VECTOR_INLINE void logSoftmaxOf(const T* __restrict x, T* __restrict y, std::int64_t d) {
  const T top = maxOf(x, d);
  const T shift = top + std::log(sumRow<T>(d, [&](std::int64_t c) { return expOf(x[c] - top); }));
  for (std::int64_t c = 0; c < d; ++c) y[c] = x[c] - shift;
}

template <class T>
GRADC_VECTOR_INLINE void softmaxBackwardOf(const T* __restrict g, const T* __restrict y, T* __restrict out, std::int64_t d) {
  const T s = dotOf(g, y, d);
  for (std::int64_t c = 0; c < d; ++c) out[c] = y[c] * (g[c] - s);
}

template <class T>
GRADC_VECTOR_INLINE void logSoftmaxBackwardOf(const T* __restrict g, const T* __restrict y, T* __restrict out,
                                       std::int64_t d) {
  const T s = sumRow<T>(d, [g](std::int64_t c) { return g[c]; });
  for (std::int64_t c = 0; c < d; ++c) out[c] = g[c] - expOf(y[c]) * s;
}

}  // namespace

GRADC_VECTOR_CLONES float max(const float* x, std::int64_t n) { return maxOf(x, n); }
GRADC_VECTOR_CLONES double max(const double* x, std::int64_t n) { return maxOf(x, n); }

GRADC_VECTOR_CLONES float expShiftedSum(float* x, std::int64_t n, float shift) { return expShiftedSumOf(x, x, n, shift); }
GRADC_VECTOR_CLONES double expShiftedSum(double* x, std::int64_t n, double shift) { return expShiftedSumOf(x, x, n, shift); }

GRADC_VECTOR_CLONES void expShifted(float* x, std::int64_t n, float shift) {
  for (std::int64_t c = 0; c < n; ++c) x[c] = vmath::expNotAbove(x[c] - shift);
}
GRADC_VECTOR_CLONES void expShifted(double* x, std::int64_t n, double shift) {
  for (std::int64_t c = 0; c < n; ++c) x[c] = std::exp(x[c] - shift);
}

GRADC_VECTOR_CLONES void scale(float* x, std::int64_t n, float factor) {
  for (std::int64_t c = 0; c < n; ++c) x[c] *= factor;
}
GRADC_VECTOR_CLONES void scale(double* x, std::int64_t n, double factor) {
  for (std::int64_t c = 0; c < n; ++c) x[c] *= factor;
}

GRADC_VECTOR_CLONES float dot(const float* a, const float* b, std::int64_t n) { return dotOf(a, b, n); }
GRADC_VECTOR_CLONES double dot(const double* a, const double* b, std::int64_t n) { return dotOf(a, b, n); }

GRADC_VECTOR_CLONES void mulShifted(float* p, const float* d, std::int64_t n, float shift) {
  for (std::int64_t c = 0; c < n; ++c) p[c] *= d[c] - shift;
}
GRADC_VECTOR_CLONES void mulShifted(double* p, const double* d, std::int64_t n, double shift) {
  for (std::int64_t c = 0; c < n; ++c) p[c] *= d[c] - shift;
}

GRADC_VECTOR_CLONES Moments<float> layerNorm(const float* x, const float* w, const float* b, float* y, std::int64_t d,
                                          float eps) {
  return layerNormOf(x, w, b, y, d, eps);
}
GRADC_VECTOR_CLONES Moments<double> layerNorm(const double* x, const double* w, const double* b, double* y,
                                           std::int64_t d, double eps) {
  return layerNormOf(x, w, b, y, d, eps);
}

GRADC_VECTOR_CLONES void layerNormBackward(const float* dy, const float* x, float mean, float rstd, const float* w,
                                        float* dx, float* gw, float* gb, std::int64_t d) {
  layerNormBackwardOf(dy, x, mean, rstd, w, dx, gw, gb, d);
}
GRADC_VECTOR_CLONES void layerNormBackward(const double* dy, const double* x, double mean, double rstd, const double* w,
                                        double* dx, double* gw, double* gb, std::int64_t d) {
  layerNormBackwardOf(dy, x, mean, rstd, w, dx, gw, gb, d);
}

GRADC_VECTOR_CLONES void softmax(const float* x, float* y, std::int64_t d) { softmaxOf(x, y, d); }
GRADC_VECTOR_CLONES void softmax(const double* x, double* y, std::int64_t d) { softmaxOf(x, y, d); }
GRADC_VECTOR_CLONES void logSoftmax(const float* x, float* y, std::int64_t d) { logSoftmaxOf(x, y, d); }
GRADC_VECTOR_CLONES void logSoftmax(const double* x, double* y, std::int64_t d) { logSoftmaxOf(x, y, d); }
GRADC_VECTOR_CLONES void softmaxBackward(const float* g, const float* y, float* out, std::int64_t d) {
  softmaxBackwardOf(g, y, out, d);
}
GRADC_VECTOR_CLONES void softmaxBackward(const double* g, const double* y, double* out, std::int64_t d) {
  softmaxBackwardOf(g, y, out, d);
}
GRADC_VECTOR_CLONES void logSoftmaxBackward(const float* g, const float* y, float* out, std::int64_t d) {
  logSoftmaxBackwardOf(g, y, out, d);
}
GRADC_VECTOR_CLONES void logSoftmaxBackward(const double* g, const double* y, double* out, std::int64_t d) {
  logSoftmaxBackwardOf(g, y, out, d);
}

}  // namespace gradc::runtime::rows
