// One element of the counter-based RNG (runtime/core/counter_rng.h), written once for the host and
// the GPU: the CUDA dropout kernel (runtime/cuda/dropout_kernel.cu) draws element i with exactly
// this function, and the CPU test suite checks it against uniformAt() bit for bit, so the GPU's
// dropout masks are the CPU's. Plain integer arithmetic, no std:: types (nvcc compiles it as
// device code).
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#define GRADC_HOST_DEVICE __host__ __device__
#else
#define GRADC_HOST_DEVICE
#endif

namespace gradc::runtime::philox {

// Philox-4x32-10 of counter (block lo, block hi, step lo, step hi) under key (k0, k1); returns
// word `lane` (0..3) of the 128-bit block.
GRADC_HOST_DEVICE inline uint32_t word(uint64_t block, uint64_t step, uint32_t k0, uint32_t k1, unsigned lane) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(step), c3 = static_cast<uint32_t>(step >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
}

// The uniform float of stream position `index`: its word's top 24 bits times 2^-24, in [0, 1).
GRADC_HOST_DEVICE inline float uniform(uint64_t index, uint64_t step, uint32_t k0, uint32_t k1) {
  const uint32_t bits = word(index / 4, step, k0, k1, static_cast<unsigned>(index % 4));
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

}  // namespace gradc::runtime::philox
