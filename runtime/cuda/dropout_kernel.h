// The CUDA dropout kernel's launcher, callable from C++ that includes no CUDA header (the
// kernel itself is runtime/cuda/dropout_kernel.cu, compiled by nvcc).
//
// y[i] = u(pos(i)) >= threshold ? x[i] * scale : 0, with u the counter-based RNG's uniform
// of (step, key) (runtime/cuda/philox_element.h), exactly as the CPU dropout kernel computes it:
// the same mask bit for bit, the product rounded the same way (f16/bf16 multiply in f32 and
// round once, as the CPU kernel does). pos(i) = offset + i, or with runs (a block of a larger
// tensor: fused attention's probabilities, runtime/kernels/attention_composite.h)
// offset + (i / run) * runStride + i % run.
#pragma once

#include <cstdint>

#include "runtime/cuda/element.h"

namespace gradc::runtime::cuda {

struct DropoutLaunch {
  const void* x = nullptr;  // n contiguous elements on the device (may be y: in place)
  void* y = nullptr;        // n contiguous elements on the device
  std::int64_t n = 0;
  std::uint64_t offset = 0;  // stream position of element 0 (the node's rng_offset)
  std::int64_t run = 0;          // 0: consecutive positions; else runs of this many elements...
  std::uint64_t runStride = 0;   // ...whose first positions are this far apart
  std::uint64_t step = 0;
  std::uint32_t k0 = 0, k1 = 0;  // the stream's Philox key (runtime/core/counter_rng.h: philoxKey)
  float threshold = 0;           // p rounded up to the uniforms' 2^-24 grid
  double scale = 1;              // 1 / (1 - p)
  Element element = Element::f32;
  void* stream = nullptr;  // cudaStream_t to launch on
};

// Launches the kernel. nullptr on success, else the CUDA runtime's error string.
const char* launchDropout(const DropoutLaunch& launch);

}  // namespace gradc::runtime::cuda
