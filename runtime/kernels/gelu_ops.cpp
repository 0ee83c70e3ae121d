// GELU's vector loops: see gelu_ops.h. Built at -O3 with FMA contraction and without trapping
// math (sources.cmake), cloned per instruction set (vector_math.h).
//
// The loops run on chunks of kChunk elements, one stage at a time (the reciprocal, the
// polynomial, the exps, the result) through small arrays: each stage is then several
// independent vectors, which the core overlaps. Written as one pass per element, the same math
// was one long chain of dependent operations per vector and ran about 1.6x slower. The last
// partial chunk is computed in a zero-padded copy.
#include "runtime/kernels/gelu_ops.h"

#include <algorithm>
#include <cmath>

#include "runtime/kernels/vector_math.h"

namespace gradc::runtime::gelu {
namespace {

constexpr int kChunk = 64;
constexpr float kInvSqrt2Over2 = 0.35355339059327376f;  // z / 2 = |x| / (2 sqrt 2)
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// phi[j] = Phi(x[j]); with Gauss, gauss[j] = e^(-x[j]^2 / 2) too. Arguments beyond +-16 are
// taken as +-16 (Phi is 0 or 1 there in f32, and the squares stay finite), so infinite inputs
// give ATen's results: gelu(inf) = inf, gelu(-inf) = -inf * 0 = NaN; NaN stays NaN.
template <bool Gauss>
GRADC_VECTOR_INLINE void phiOf(const float* __restrict input, float* __restrict phi, float* __restrict gauss) {
  float x[kChunk], t[kChunk], arg[kChunk], factor[kChunk], low[kChunk];
  for (int j = 0; j < kChunk; ++j) x[j] = std::min(std::max(input[j], -16.0f), 16.0f);
  for (int j = 0; j < kChunk; ++j) t[j] = 1.0f / (1.0f + kInvSqrt2Over2 * std::fabs(x[j]));
  for (int j = 0; j < kChunk; ++j) {
    const float u = t[j];
    float p = 0.17087277f;
    p = p * u - 0.82215223f;
    p = p * u + 1.48851587f;
    p = p * u - 1.13520398f;
    p = p * u + 0.27886807f;
    p = p * u - 0.18628806f;
    p = p * u + 0.09678418f;
    p = p * u + 0.37409196f;
    p = p * u + 1.00002368f;
    p = p * u - 1.26551223f;
    const float square = x[j] * x[j];
    low[j] = -0.5f * __builtin_fmaf(x[j], x[j], -square);  // -z^2 = -square / 2 + low, exactly
    const float minusZ2 = -0.5f * square;
    const float sum = minusZ2 + p;  // |minusZ2| >= |p| where it matters: the rounding is exact below
    arg[j] = sum;
    factor[j] = 1.0f + (((minusZ2 - sum) + p) + low[j]);
    if (Gauss) gauss[j] = minusZ2;
  }
  for (int j = 0; j < kChunk; ++j) {
    const float half = 0.5f * t[j] * vmath::expNotAbove(arg[j]) * factor[j];
    const float upper = 1.0f - half;
    phi[j] = x[j] < 0.0f ? half : upper;
  }
  if (Gauss)
    for (int j = 0; j < kChunk; ++j) gauss[j] = vmath::expNotAbove(gauss[j]) * (1.0f + low[j]);
}

GRADC_VECTOR_INLINE void forwardChunk(const float* __restrict x, float* __restrict y) {
  float phi[kChunk];
  phiOf<false>(x, phi, nullptr);
  for (int j = 0; j < kChunk; ++j) y[j] = x[j] * phi[j];
}

GRADC_VECTOR_INLINE void backwardChunk(const float* __restrict g, const float* __restrict x, float* __restrict out) {
  float phi[kChunk], gauss[kChunk];
  phiOf<true>(x, phi, gauss);
  for (int j = 0; j < kChunk; ++j) out[j] = g[j] * (phi[j] + x[j] * gauss[j] * kInvSqrt2Pi);
}

}  // namespace

GRADC_VECTOR_CLONES void forward(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) forwardChunk(x + i, y + i);
  if (i < n) {
    float xs[kChunk] = {}, ys[kChunk];
    std::copy(x + i, x + n, xs);
    forwardChunk(xs, ys);
    std::copy(ys, ys + (n - i), y + i);
  }
}

GRADC_VECTOR_CLONES void backward(const float* g, const float* x, float* out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kChunk <= n; i += kChunk) backwardChunk(g + i, x + i, out + i);
  if (i < n) {
    float gs[kChunk] = {}, xs[kChunk] = {}, outs[kChunk];
    std::copy(g + i, g + n, gs);
    std::copy(x + i, x + n, xs);
    backwardChunk(gs, xs, outs);
    std::copy(outs, outs + (n - i), out + i);
  }
}

}  // namespace gradc::runtime::gelu
