// The table of backends (runtime/device/backends.h): the host's row, and one row per device
// folder. A backend this build lacks keeps its row, with the reason, so that asking for it says
// what to build instead of "unknown device".
#include "runtime/device/backends.h"

#include "runtime/comm/gloo_communicator.h"
#if defined(GRADC_WITH_CUDA_DEVICE)
#include "runtime/cuda/cuda_backend.h"
#endif

namespace gradc::runtime {
namespace {

Backend hostRow() {
  Backend b;
  b.name = "cpu";
  b.host = true;
  b.visibleDevices = []() -> Expected<int> { return 1; };
  b.device = [](int) -> Expected<const Device*> { return &cpuDevice(); };
  b.communicator = [](const DistEnv& env, int, std::chrono::milliseconds timeout) {
    return GlooCommunicator::create(env, timeout);
  };
  b.kernelFormat = GeneratedKernelFormat::sharedObject;
  b.loadKernels = sharedObjectKernelsFromBytes;
  b.memoryCheck = MemoryCheck::host;
  return b;
}

[[maybe_unused]] Backend absentRow(std::string_view name, std::string_view why) {
  Backend b;
  b.name = name;
  b.missing = why;
  return b;
}

}  // namespace

std::span<const Backend> backends() {
  static const Backend table[] = {
      hostRow(),
#if defined(GRADC_WITH_CUDA_DEVICE)
      cudaBackend(),
#else
      absentRow("cuda", "this gradc was built against a CPU-only LibTorch, so it cannot run on a GPU; build it against "
                        "a CUDA LibTorch (docs/gpu.md)"),
#endif
  };
  return table;
}

const Backend* findBackend(std::string_view name) {
  for (const Backend& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

const Backend& hostBackend() { return backends().front(); }

std::string backendNames() {
  std::string out;
  for (const Backend& b : backends()) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

}  // namespace gradc::runtime
