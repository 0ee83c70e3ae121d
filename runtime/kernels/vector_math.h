// Scalar math written so that the loops calling it become vector code, for the host kernels'
// vector loops (row_ops.cpp, gelu_ops.cpp). Those files are built at -O3 without trapping math
// (sources.cmake): with trapping math GCC will not turn a select between a computed value and
// a constant into a blend without AVX-512's masks, and the AVX2 clones of these loops stayed
// scalar (about 13x slower). Each public function there is cloned per instruction set
// (GRADC_VECTOR_CLONES: GCC's and Clang's target_clones, an ifunc picking the clone when the
// library loads) and calls forced-inline templates, so every clone compiles its own vector code.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GRADC_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GRADC_VECTOR_CLONES
#endif
#define GRADC_VECTOR_INLINE inline __attribute__((always_inline))

namespace gradc::runtime::vmath {

// e^x for f32 without a library call: x = n ln2 + t (n = round(x / ln2), ln2 split in two for
// an exact product), e^t by Cephes' degree-6 expf polynomial (about 1 ulp), times 2^n built in
// the exponent bits. For arguments at most a rounding above 0 (scores minus a row's maximum or
// log-sum-exp, minus squares); below -87 (e^x under the smallest normal f32) the result is 0.
GRADC_VECTOR_INLINE float expNotAbove(float x) {
  const float clamped = std::min(std::max(x, -87.0f), 80.0f);
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float t = clamped - n * 0.693359375f - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * t + 1.3981999507e-3f;
  p = p * t + 8.3334519073e-3f;
  p = p * t + 4.1665795894e-2f;
  p = p * t + 1.6666665459e-1f;
  p = p * t + 5.0000001201e-1f;
  const float e = p * t * t + t + 1.0f;
  const float scaled = e * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : scaled;
}

}  // namespace gradc::runtime::vmath
