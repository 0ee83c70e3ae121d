// Batch normalisation's per-channel loops in f32 as vector code, for the host's batch_norm and
// batch_norm_backward kernels (runtime/kernels/kernels_conv.cpp). A channel's values are
// `planes` runs of `size` contiguous elements, run p at base + p * stride (NCHW: the channel's
// plane in each sample).
//
// The sums widen each f32 value to f64 and accumulate in 64 f64 lanes (eight vectors), the
// differences from the centre and the products in f64 too: the arithmetic of ATen's CPU kernel
// (f64 accumulation for f32 data), with the conversions and additions as vector code. The order
// of the additions depends only on the shape, so the same data gives the same bits on any
// thread count.
#pragma once

#include <cstdint>

namespace gradc::runtime::batch_norm {

// A channel's values: `planes` runs of `size` elements, run p starting at base + p * stride.
struct Runs {
  std::int64_t planes, stride, size;
};

// sum(x) over the channel's values.
double sum(const float* x, Runs runs);

// sum((x - centre)^2) over the channel's values (centre: the mean rounded to f32; the caller
// corrects for its rounding).
double squaredDeviations(const float* x, Runs runs, float centre);

// sum(g) and sum(g * (x - centre)) over the channel's values of g and x (the same runs).
struct GradientSums {
  double grad, gradTimesDeviation;
};
GradientSums gradientSums(const float* g, const float* x, Runs runs, float centre);

// y = x * scale + shift over the channel's values (y's runs are x's).
void affine(const float* x, float* y, Runs runs, float scale, float shift);

// out = g * kg + x * kx + k0 over the channel's values (all three share the runs).
void gradInput(const float* g, const float* x, float* out, Runs runs, float kg, float kx, float k0);

}  // namespace gradc::runtime::batch_norm
