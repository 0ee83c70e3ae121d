#include "runtime/device/device.h"

#include <sys/mman.h>

#include <cstdlib>

#include "runtime/core/dtype_map.h"

namespace gradc::runtime {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

void releaseHost(void* data, std::size_t) { std::free(data); }

}  // namespace

at::TensorOptions CpuDevice::options(ir::DType dtype) const {
  return at::TensorOptions().dtype(toScalarType(dtype)).device(at::kCPU);
}

Expected<DeviceMemory> CpuDevice::allocate(std::int64_t bytes) const {
  if (bytes < 0) return Error{"cannot allocate " + std::to_string(bytes) + " bytes"};
  if (bytes == 0) return DeviceMemory(nullptr, DeviceMemoryDeleter{});
  const auto n = static_cast<std::size_t>(bytes);
  const std::size_t alignment = n >= kHugePage ? kHugePage : kArenaAlignment;
  const std::size_t rounded = (n + alignment - 1) / alignment * alignment;  // aligned_alloc wants a multiple
  void* data = std::aligned_alloc(alignment, rounded);
  if (!data)
    return environmentError("cannot allocate the " + std::to_string(bytes) + "-byte arena in host memory (out of memory)");
  if (alignment == kHugePage) (void)madvise(data, rounded, MADV_HUGEPAGE);
  return DeviceMemory(static_cast<std::byte*>(data), DeviceMemoryDeleter{&releaseHost, rounded});
}

Status CpuDevice::canTrain(ir::DType dtype) const {
  if (dtype == ir::DType::f16)
    return Error{"the CPU device cannot train f16 models: LibTorch's CPU kernels have no f16 layer_norm or matrix "
                 "product; use dtype: f32 or bf16 in the spec"};
  return Status::success();
}

const Device& cpuDevice() {
  static const CpuDevice device;
  return device;
}

}  // namespace gradc::runtime
