// The CUDA device's own kernels (runtime/kernels.h's device layer, CudaDevice::kernels()): the
// ops whose portable ATen kernel cannot serve a GPU.
//  - dropout: no ATen call draws gradc's counter-based mask; runtime/cuda/dropout_kernel.h
//    draws the host's mask bit for bit (the element function is checked against the host's
//    generator in tests/runtime/counter_rng_test.cpp).
//  - softmax_backward: ATen's CUDA kernel materialises grad * y beside the plan;
//    runtime/cuda/softmax_backward_kernel.h needs nothing beyond the result.
// Every other op runs its portable kernel.
#pragma once

#include <span>

#include "runtime/kernels.h"

namespace gradc::runtime {

std::span<const KernelEntry> cudaKernels();

}  // namespace gradc::runtime
