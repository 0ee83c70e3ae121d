// The CUDA device's own kernels (runtime/kernels/kernels.h's device layer, CudaDevice::kernels()): the
// ops whose portable ATen kernel cannot serve a GPU.
//  - dropout: no ATen call draws gradc's counter-based mask; runtime/cuda/dropout_kernel.h
//    draws the host's mask bit for bit (the element function is checked against the host's
//    generator in tests/runtime/counter_rng_test.cpp).
//  - softmax_backward: ATen's CUDA kernel materialises grad * y beside the plan;
//    runtime/cuda/softmax_backward_kernel.h needs nothing beyond the result.
//  - layer_norm and its backward: the portable kernels, with f16/bf16 statistics computed in f32
//    as ATen's CUDA kernel keeps them (runtime/kernels/kernels.h);
//  - attention and its backward: ATen's memory-efficient kernel where it fits
//    (runtime/cuda/cuda_attention.h), never holding the [S, S_kv] scores;
//  - fused, and adamw_step {fused = true}: the artifact's PTX of the region or update
//    (runtime/cuda/ptx_kernels.h), launched on the rank's stream; an update without PTX runs
//    the portable kernel.
// Every other op runs its portable kernel.
#pragma once

#include <span>

#include "runtime/kernels/kernels.h"

namespace gradc::runtime {

std::span<const KernelEntry> cudaKernels();

}  // namespace gradc::runtime
