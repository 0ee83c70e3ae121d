// The CUDA softmax backward's launcher, callable from C++ that includes no CUDA header (the
// kernel itself is runtime/cuda/softmax_backward_kernel.cu, compiled by nvcc).
//
// gx = y * (g - sum(g * y)) along one axis of contiguous tensors, seen as [outer, size, inner]:
// one thread block per (outer, inner) line, which sums g * y over the line in the accumulation
// type (f32 for f32/f16/bf16, f64 for f64) and then writes the line. Nothing is allocated:
// ATen's CUDA softmax backward first materialises g * y, a temporary the size of the operand
// that no memory plan holds (an attention's [batch, heads, seq, seq] probabilities, 11 GB for
// GPT-2 small at batch 225).
#pragma once

#include <cstdint>

#include "runtime/cuda/element.h"

namespace gradc::runtime::cuda {

struct SoftmaxBackwardLaunch {
  const void* grad = nullptr;  // g: outer * size * inner contiguous elements on the device
  const void* y = nullptr;     // softmax's result, the same layout
  void* out = nullptr;         // gx, the same layout
  std::int64_t outer = 0, size = 0, inner = 0;
  Element element = Element::f32;  // the element type of all three
  void* stream = nullptr;                        // cudaStream_t to launch on
};

// Launches the kernel. nullptr on success, else the CUDA runtime's error string.
const char* launchSoftmaxBackward(const SoftmaxBackwardLaunch& launch);

}  // namespace gradc::runtime::cuda
