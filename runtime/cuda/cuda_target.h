// The CUDA backend's compile-time description (ir/kernel_target.h), built without LibTorch into
// gradc_kernel_targets, so every build plans for GPUs: ATen's fused attention where it runs the
// node, NCCL between ranks (bf16 sums too), PTX, the libraries' reserve.
#pragma once

#include "ir/kernel_target.h"

namespace gradc::runtime {
struct Backend;
}  // namespace gradc::runtime

namespace gradc::runtime::cuda {

const ir::KernelTarget& kernelTarget();
// Its row of the backend table (runtime/backends/backends.h): cuda_backend.cpp in builds against a
// CUDA LibTorch, else a row that says why this build lacks it (cuda_absent.cpp).
Backend backend();

}  // namespace gradc::runtime::cuda
