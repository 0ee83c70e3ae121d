// The host's row of the backend table (runtime/backends/backends.h): the CPU, one device for every
// local rank, Gloo between ranks, the artifact's CPU shared object, arenas checked against the
// host's available memory together.
#include "runtime/comm/gloo_communicator.h"
#include "runtime/backends/backends.h"
#include "runtime/host/host_target.h"

namespace gradc::runtime {

Backend host::backend() {
  Backend b;
  b.target = &host::kernelTarget();
  b.name = b.target->name();
  b.host = true;
  b.visibleDevices = []() -> Expected<int> { return 1; };
  b.device = [](int) -> Expected<const Device*> { return &cpuDevice(); };
  b.communicator = [](const DistEnv& env, int, std::chrono::milliseconds timeout) {
    return GlooCommunicator::create(env, timeout);
  };
  b.loadKernels = sharedObjectKernelsFromBytes;
  b.memoryCheck = MemoryCheck::host;
  return b;
}

}  // namespace gradc::runtime
