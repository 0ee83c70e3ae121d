// The reference backend's device and row: host memory through the CPU device, the portable
// kernels, Gloo between ranks, arenas checked against the host's memory.
#include "runtime/reference/reference_backend.h"

#include "runtime/backends/backends.h"
#include "runtime/device/device.h"
#include "runtime/host/host_target.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime::reference {
namespace {

// The host's kernels of the ops that have no portable one (dropout: the counter-based RNG's
// masks, which only a device's own kernel draws).
std::span<const KernelEntry> ownKernels() {
  static const std::vector<KernelEntry> own = [] {
    std::vector<KernelEntry> entries;
    for (const KernelEntry& e : hostKernels())
      if (!findPortableKernel(e.op)) entries.push_back(e);
    return entries;
  }();
  return own;
}

// The CPU device without the host's kernels: every op that has a portable ATen kernel runs it.
class ReferenceDevice final : public Device {
 public:
  std::string name() const override { return "cpu (reference kernels)"; }
  at::TensorOptions options(ir::DType dtype) const override { return cpuDevice().options(dtype); }
  Expected<DeviceMemory> allocate(std::int64_t bytes) const override { return cpuDevice().allocate(bytes); }
  Status canTrain(ir::DType dtype) const override { return cpuDevice().canTrain(dtype); }
  bool isHost() const override { return true; }
  std::span<const KernelEntry> kernels() const override { return ownKernels(); }
};

const Device& referenceDevice() {
  static const ReferenceDevice device;
  return device;
}

}  // namespace

// The host's row (its devices, Gloo, the memory check) with this description and device, and no
// kernel loader (it runs the reference step).
Backend backend() {
  Backend b = host::backend();
  b.target = &kernelTarget();
  b.name = b.target->name();
  b.device = [](int) -> Expected<const Device*> { return &referenceDevice(); };
  b.loadKernels = nullptr;
  return b;
}

}  // namespace gradc::runtime::reference
