// The exact (erf) GELU and its gradient in f32 as vector loops, for the host's gelu kernels
// (runtime/kernels/kernels_gelu.cpp):
//     gelu(x) = x Phi(x),   gelu'(x) = Phi(x) + x phi(x),   phi(x) = e^(-x^2/2) / sqrt(2 pi)
// Phi from the complementary error function, so the negative tail keeps its relative accuracy
// where 1 + erf(x / sqrt 2) would cancel: with z = |x| / sqrt 2 and t = 1 / (1 + z / 2),
//     erfc(z) = t e^(-z^2 + P(t))   (Numerical Recipes' erfcc: P of degree 9, relative error < 1.2e-7)
//     Phi(x) = erfc(z) / 2 for x < 0, 1 - erfc(z) / 2 otherwise
// -z^2 = -x^2 / 2 is carried as a rounded part and its exact remainder (an FMA), and the rounding
// of -z^2 + P(t) is carried too, both applied as a first-order factor after the exp: the result's
// relative error stays below 5e-7 over [-13, 14], gelu's own normal-f32 range.
#pragma once

#include <cstdint>

namespace gradc::runtime::gelu {

// y[i] = gelu(x[i]) for i < n (x and y do not overlap).
void forward(const float* x, float* y, std::int64_t n);

// out[i] = g[i] gelu'(x[i]) for i < n (out overlaps neither g nor x).
void backward(const float* g, const float* x, float* out, std::int64_t n);

}  // namespace gradc::runtime::gelu
