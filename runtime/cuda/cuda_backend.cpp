// The CUDA backend's row of the backend table (runtime/backends/backends.h): GPUs of this machine,
// one per local rank (runtime/cuda/cuda_device.h), NCCL between ranks
// (runtime/cuda/nccl_tensor_communicator.h), the artifact's fused kernels as PTX
// (runtime/cuda/ptx_kernels.h), each rank's arena checked against its GPU's free memory.
#include "runtime/cuda/cuda_target.h"

#include "runtime/backends/backends.h"

#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl_tensor_communicator.h"
#include "runtime/cuda/ptx_kernels.h"

namespace gradc::runtime {

Backend cuda::backend() {
  Backend b;
  b.target = &cuda::kernelTarget();
  b.name = b.target->name();
  b.visibleDevices = visibleCudaDevices;
  b.device = cudaDevice;
  b.communicator = createNcclCommunicator;
  b.loadKernels = ptxKernelsFromText;
  b.memoryCheck = MemoryCheck::device;
  return b;
}

}  // namespace gradc::runtime
