// The CUDA backend's row of the backend table (runtime/device/backends.h): GPUs of this machine,
// one per local rank (runtime/cuda/cuda_device.h), NCCL between ranks
// (runtime/cuda/nccl_tensor_communicator.h), the artifact's fused kernels as PTX
// (runtime/cuda/ptx_kernels.h), each rank's arena checked against its GPU's free memory.
#pragma once

#include "runtime/device/backends.h"

namespace gradc::runtime {

Backend cudaBackend();

}  // namespace gradc::runtime
