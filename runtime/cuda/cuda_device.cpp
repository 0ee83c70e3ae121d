#include "runtime/cuda/cuda_device.h"

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <torch/version.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/counter_rng.h"
#include "runtime/cuda/dropout_kernel.h"
#include "runtime/dtype_map.h"

namespace gradc::runtime {
namespace {

void releaseDevice(void* data, std::size_t) { (void)cudaFree(data); }

std::string bytesText(std::size_t bytes) {
  return std::to_string(bytes) + " bytes (" + std::to_string(bytes >> 20) + " MiB)";
}

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

  std::int64_t internalBytes() const override { return allocatedBytes(index_).current; }
  std::int64_t internalPeakBytes() const override { return allocatedBytes(index_).peak; }
  void resetInternalPeak() const override {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index_));
  }

  void synchronize() const override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index_));
    (void)cudaDeviceSynchronize();
  }

  Status dropout(const at::Tensor& x, at::Tensor& y, const RngStream& rng, std::int64_t offset, float threshold,
                 double scale) const override {
    cuda::DropoutLaunch l;
    switch (x.scalar_type()) {
      case at::kFloat: l.element = cuda::DropoutElement::f32; break;
      case at::kDouble: l.element = cuda::DropoutElement::f64; break;
      case at::kHalf: l.element = cuda::DropoutElement::f16; break;
      case at::kBFloat16: l.element = cuda::DropoutElement::bf16; break;
      default: return Error{std::string("dropout on ") + name() + ": no kernel for " + c10::toString(x.scalar_type())};
    }
    if (!x.is_contiguous() || !y.is_contiguous() || x.numel() != y.numel())
      return Error{"dropout on " + name() + ": operand and result must be contiguous and of one size"};
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index_));
    const PhiloxKey key = philoxKey(rng);
    l.x = x.data_ptr();
    l.y = y.data_ptr();
    l.n = x.numel();
    l.offset = static_cast<std::uint64_t>(offset);
    l.step = static_cast<std::uint64_t>(rng.step);
    l.k0 = key[0];
    l.k1 = key[1];
    l.threshold = threshold;
    l.scale = scale;
    l.stream = at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index_)).stream();
    if (const char* e = cuda::launchDropout(l)) return Error{"dropout on " + name() + ": " + e};
    return {};
  }

 private:
  int index_;
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
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
    at::globalContext().setDeterministicFillUninitializedMemory(false);
#endif
    slot = std::make_unique<CudaDevice>(index);
    // ATen initialises its CUDA state (the caching allocator included) on the first CUDA tensor;
    // the arena's views do not allocate, so one empty tensor does it before anything is read.
    (void)at::empty({0}, slot->options(ir::DType::f32));
  }
  return slot.get();
}

}  // namespace gradc::runtime
