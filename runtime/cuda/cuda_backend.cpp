#include "runtime/cuda/cuda_backend.h"

#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/nccl_tensor_communicator.h"
#include "runtime/cuda/ptx_kernels.h"

namespace gradc::runtime {

Backend cudaBackend() {
  Backend b;
  b.name = "cuda";
  b.visibleDevices = visibleCudaDevices;
  b.device = cudaDevice;
  b.communicator = createNcclCommunicator;
  b.kernelFormat = GeneratedKernelFormat::ptx;
  b.loadKernels = ptxKernelsFromText;
  b.memoryCheck = MemoryCheck::device;
  return b;
}

}  // namespace gradc::runtime
