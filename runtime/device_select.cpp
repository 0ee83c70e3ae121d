#include "runtime/device_select.h"

#if defined(GRADC_WITH_CUDA_DEVICE)
#include "runtime/cuda/cuda_device.h"
#endif

namespace gradc::runtime {

Expected<DeviceChoice> parseDeviceChoice(std::string_view text) {
  if (text == "cpu") return DeviceChoice::cpu;
  if (text == "cuda") return DeviceChoice::cuda;
  if (text == "auto") return DeviceChoice::automatic;
  return Error{"unknown device '" + std::string(text) + "': use cpu, cuda or auto"};
}

Expected<bool> resolvesToCuda(DeviceChoice choice, int localRanks) {
  if (choice == DeviceChoice::cpu) return false;
#if defined(GRADC_WITH_CUDA_DEVICE)
  Expected<int> gpus = visibleCudaDevices();
  if (choice == DeviceChoice::automatic) return gpus && *gpus >= localRanks;
  if (!gpus) return Error{"--device cuda: no CUDA GPU is visible (" + gpus.error().message + "); use --device cpu"};
  if (localRanks > *gpus)
    return Error{"--device cuda: " + std::to_string(localRanks) + " ranks on this machine need a GPU each, but " +
                 std::to_string(*gpus) + " GPU" + (*gpus == 1 ? " is" : "s are") +
                 " visible (NCCL runs one rank per GPU: use at most " + std::to_string(*gpus) + " --devices here)"};
  return true;
#else
  (void)localRanks;
  if (choice == DeviceChoice::automatic) return false;
  return Error{"--device cuda: this gradc was built against a CPU-only LibTorch, so it cannot run on a GPU; build it "
               "against a CUDA LibTorch (docs/gpu.md) or use --device cpu"};
#endif
}

Expected<const Device*> selectDevice(DeviceChoice choice, int localRank) {
  Expected<bool> cuda = resolvesToCuda(choice, localRank + 1);
  if (!cuda) return cuda.error();
  if (!*cuda) return &cpuDevice();
#if defined(GRADC_WITH_CUDA_DEVICE)
  return cudaDevice(localRank);
#else
  return Error{"--device cuda: this gradc has no CUDA device"};  // not reached: resolvesToCuda said no
#endif
}

}  // namespace gradc::runtime
