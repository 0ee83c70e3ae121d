// The device seam: where a rank's tensors live and how its arena is allocated.
//
// The executor takes a Device. Kernels build every tensor they create from the device's tensor
// options (never from a CPU constant), and the arena -- the one block that holds every planned
// buffer of a rank (runtime/exec/executor.h) -- comes from the device's allocator. CPU is the device
// implemented here: aligned host memory, advised for transparent huge pages. The CUDA device
// (runtime/cuda/cuda_device.h, in builds against a CUDA LibTorch) plugs in through the same
// interface: cudaMalloc for the arena, kCUDA options, ATen's own allocations read from the CUDA
// caching allocator's statistics, and its own kernels (kernels(): dropout's counter-based RNG,
// a softmax backward that allocates nothing). Kernels that read memory through raw pointers are
// the host's own; every other device runs the portable ATen kernels (runtime/kernels/kernels.h).
//
// Choosing one: runtime/backends/device_select.h (`--device cpu|cuda|auto`).
#pragma once

#include <c10/core/TensorOptions.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ir/dtype.h"
#include "ir/status.h"

namespace at {
class Tensor;
}

namespace gradc::runtime {

struct KernelEntry;  // runtime/kernels/kernels.h

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

  // True for host memory: kernels may read and write this device's tensors through raw
  // pointers (the CPU kernels' loops). Other devices get ATen's device-generic paths.
  virtual bool isHost() const { return false; }
  // Bytes the device can still give, for the memory preflight; nullopt: the host's check applies.
  virtual std::optional<std::int64_t> freeBytes() const { return std::nullopt; }
  // A non-host device's own allocations made by ATen outside the arena (cuBLAS/cuDNN
  // workspaces, temporaries): bytes alive now, and the high-water mark since the last
  // resetInternalPeak(). The host's are the MemoryTracker's (runtime/exec/memory_tracker.h).
  virtual std::int64_t internalBytes() const { return 0; }
  virtual std::int64_t internalPeakBytes() const { return 0; }
  virtual void resetInternalPeak() const {}
  // Of the internal bytes, those the device's libraries hold for the whole run (cuBLAS's
  // workspaces), measured once the device is ready: what a plan's reserve must cover
  // (runtime/cuda/library_reserve.h). The host: 0.
  virtual std::int64_t libraryBytes() const { return 0; }
  // Blocks until the device has finished the work queued so far (the host: nothing queued).
  virtual void synchronize() const {}
  // The device's own kernels, which it runs instead of the portable ones for the ops they cover
  // (runtime/kernels/kernels.h): the host's loops and library calls, a GPU's CUDA kernels. The
  // portable kernels run every other op.
  virtual std::span<const KernelEntry> kernels() const { return {}; }
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
  bool isHost() const override { return true; }
  std::span<const KernelEntry> kernels() const override;  // hostKernels()
};

// The process's CPU device (the default of executors and kernels).
const Device& cpuDevice();

}  // namespace gradc::runtime
