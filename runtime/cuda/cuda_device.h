// The CUDA device (runtime/device/device.h's seam), built only against a CUDA LibTorch.
//
// - The arena is one cudaMalloc on the device (256-byte aligned, as cudaMalloc guarantees).
// - Tensors are kCUDA tensors of the device; ATen launches their kernels on the device's current
//   stream, and so do the device's own kernels (runtime/cuda/cuda_kernels.h: dropout, softmax
//   backward), so every kernel of a step runs in program order on one stream. Every other op
//   runs its portable ATen kernel (runtime/kernels/kernels.h).
// - What ATen allocates beside the arena (cuBLAS/cuDNN workspaces, temporaries) goes through the
//   CUDA caching allocator; its statistics (allocated bytes now and at their peak) are the
//   device's internal bytes, reported beside the arena as the host's tracking allocator is.
// - TF32 is off for matrix products and convolutions: f32 arithmetic is f32, as on the CPU.
#pragma once

#include "ir/status.h"
#include "runtime/device/device.h"

namespace gradc::runtime {

// How many CUDA GPUs this process sees, or an Error with the CUDA runtime's reason.
Expected<int> visibleCudaDevices();

// The device for CUDA GPU `index` (one per index, living as long as the process). Makes it the
// current device and turns TF32 off.
Expected<const Device*> cudaDevice(int index);

}  // namespace gradc::runtime
