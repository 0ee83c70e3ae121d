#include "runtime/cuda/cuda_device.h"

#include "ir/byte_format.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <torch/version.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "runtime/cuda/cuda_kernels.h"
#include "runtime/core/dtype_map.h"

namespace gradc::runtime {
namespace {

void releaseDevice(void* data, std::size_t) { (void)cudaFree(data); }

std::string bytesText(std::size_t bytes) { return ir::formatBytesExact(static_cast<std::int64_t>(bytes)); }

// The caching allocator's allocated bytes on a device, aggregated over its pools
// (StatType::AGGREGATE, index 0). `auto`: the Stat type's namespace moved in LibTorch 2.x; its
// fields did not.
auto allocatedBytes(int index) {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index)).allocated_bytes[0];
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) : index_(index) {}

  std::string name() const override { return "cuda:" + std::to_string(index_); }

  at::TensorOptions options(ir::DType dtype) const override {
    return at::TensorOptions().dtype(toScalarType(dtype)).device(at::kCUDA, static_cast<c10::DeviceIndex>(index_));
  }

  Expected<DeviceMemory> allocate(std::int64_t bytes) const override {
    if (bytes < 0) return Error{"cannot allocate " + std::to_string(bytes) + " bytes"};
    if (bytes == 0) return DeviceMemory(nullptr, DeviceMemoryDeleter{});
    if (cudaError_t e = cudaSetDevice(index_); e != cudaSuccess)
      return Error{"cannot use " + name() + ": " + cudaGetErrorString(e)};
    void* data = nullptr;
    const auto n = static_cast<std::size_t>(bytes);
    if (cudaError_t e = cudaMalloc(&data, n); e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state of a failed allocation
      std::size_t free = 0, total = 0;
      (void)cudaMemGetInfo(&free, &total);
      return Error{"cannot allocate the " + bytesText(n) + " arena on " + name() + ": " + cudaGetErrorString(e) +
                   " (" + bytesText(free) + " free of " + bytesText(total) + ")"};
    }
    return DeviceMemory(static_cast<std::byte*>(data), DeviceMemoryDeleter{&releaseDevice, n});
  }

  Status canTrain(ir::DType) const override { return Status::success(); }

  std::optional<std::int64_t> freeBytes() const override {
    std::size_t free = 0, total = 0;
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index_));
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
    return static_cast<std::int64_t>(free);
  }

  std::int64_t libraryBytes() const override { return libraryBytes_; }
  // Makes ATen create its cuBLAS and cuBLASLt handles and workspaces (which it otherwise does
  // at the first matrix product, inside some step) and records what they hold.
  void warmLibraries() {
    {
      const at::TensorOptions f32 = options(ir::DType::f32);
      const at::Tensor a = at::ones({8, 8}, f32), b = at::ones({8, 8}, f32), bias = at::ones({8}, f32);
      (void)at::mm(a, b);
      (void)at::addmm(bias, a, b);
      (void)at::bmm(a.unsqueeze(0), b.unsqueeze(0));
    }
    synchronize();
    libraryBytes_ = allocatedBytes(index_).current;
  }

  std::int64_t internalBytes() const override { return allocatedBytes(index_).current; }
  std::int64_t internalPeakBytes() const override { return allocatedBytes(index_).peak; }
  void resetInternalPeak() const override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index_));
  }

  void synchronize() const override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index_));
    (void)cudaDeviceSynchronize();
  }

  std::span<const KernelEntry> kernels() const override { return cudaKernels(); }

 private:
  int index_;
  std::int64_t libraryBytes_ = 0;
};

}  // namespace

Expected<int> visibleCudaDevices() {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    (void)cudaGetLastError();
    return Error{cudaGetErrorString(e)};
  }
  if (count == 0) return Error{"the CUDA runtime sees no device"};
  return count;
}

Expected<const Device*> cudaDevice(int index) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<CudaDevice>> devices;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = devices[index];
  if (!slot) {
    if (cudaError_t e = cudaSetDevice(index); e != cudaSuccess)
      return Error{"cannot use cuda:" + std::to_string(index) + ": " + cudaGetErrorString(e)};
    // f32 stays f32: parity with the CPU and with PyTorch's defaults for matrix products.
    at::globalContext().setAllowTF32CuBLAS(false);
    at::globalContext().setAllowTF32CuDNN(false);
    // Deterministic kernels, so that a GPU run repeats itself bit for bit and a recomputing plan
    // trains exactly as the plan without recompute (as on the CPU): index_add_ (the embedding's
    // backward) sums through a sort instead of atomics, and cuBLAS gets a fixed workspace of
    // 8 x 4 MiB per handle (CUBLAS_WORKSPACE_CONFIG; a value the user set is kept), which also
    // bounds the library memory that the arena does not hold. Memory is not filled on allocation:
    // every planned buffer is written before it is read.
    setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    setenv("CUBLASLT_WORKSPACE_SIZE", "1024", /*overwrite=*/0);  // KiB (runtime/cuda/library_reserve.h)
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
    at::globalContext().setDeterministicFillUninitializedMemory(false);
#endif
    slot = std::make_unique<CudaDevice>(index);
    // ATen initialises its CUDA state (the caching allocator included) on the first CUDA tensor;
    // the arena's views do not allocate, so one empty tensor does it before anything is read.
    (void)at::empty({0}, slot->options(ir::DType::f32));
    slot->warmLibraries();
  }
  return slot.get();
}

}  // namespace gradc::runtime
