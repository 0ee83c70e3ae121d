// The device seam: where a rank's tensors live and how its arena is allocated.
//
// The executor takes a Device. Kernels build every tensor they create from the device's tensor
// options (never from a CPU constant), and the arena -- the one block that holds every planned
// buffer of a rank (runtime/arena.h) -- comes from the device's allocator. CPU is the device
// implemented here: aligned host memory, advised for transparent huge pages. A CUDA device plugs
// in through the same interface (cudaMalloc for the arena, kCUDA options) without touching the
// kernels' logic.
#pragma once

#include <c10/core/TensorOptions.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ir/dtype.h"
#include "ir/status.h"

namespace gradc::runtime {

// A block of device memory; the deleter returns it to the device.
struct DeviceMemoryDeleter {
  void (*release)(void* data, std::size_t bytes) = nullptr;
  std::size_t bytes = 0;
  void operator()(std::byte* data) const {
    if (data && release) release(data, bytes);
  }
};
using DeviceMemory = std::unique_ptr<std::byte[], DeviceMemoryDeleter>;

class Device {
 public:
  virtual ~Device() = default;
  // "cpu", "cuda:0".
  virtual std::string name() const = 0;
  // ATen options for a tensor of `dtype` on this device.
  virtual at::TensorOptions options(ir::DType dtype) const = 0;
  // `bytes` of memory aligned to at least kArenaAlignment; an Error (never an abort) when the
  // device cannot provide it. Zero bytes gives an empty block.
  virtual Expected<DeviceMemory> allocate(std::int64_t bytes) const = 0;
  // Whether this device's kernels can run a training step in `dtype`: an Error that says why
  // not and what to use instead, checked before anything is allocated.
  virtual Status canTrain(ir::DType dtype) const = 0;
};

// Every planned offset is a multiple of the plan's alignment; the arena's base is aligned to
// at least this, so a buffer's address is as aligned as its offset.
inline constexpr std::size_t kArenaAlignment = 64;

// Host memory. Blocks of 2 MiB or more are aligned to 2 MiB and advised MADV_HUGEPAGE (fewer TLB
// misses on the arena; harmless where transparent huge pages are off).
class CpuDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  at::TensorOptions options(ir::DType dtype) const override;
  Expected<DeviceMemory> allocate(std::int64_t bytes) const override;
  // f16: LibTorch's CPU kernels have no f16 layer_norm or matrix product.
  Status canTrain(ir::DType dtype) const override;
};

// The process's CPU device (the default of executors and kernels).
const Device& cpuDevice();

}  // namespace gradc::runtime
