// The CUDA dropout kernel (runtime/cuda/dropout_kernel.h): a grid-stride loop, one element per
// thread and iteration, each drawing its own uniform from the counter-based RNG.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/cuda/dropout_kernel.h"
#include "runtime/cuda/element_arithmetic.cuh"
#include "runtime/cuda/philox_element.h"

namespace gradc::runtime::cuda {
namespace {

template <class T>
__global__ void dropoutKernel(const T* x, T* y, std::int64_t n, std::uint64_t offset,
                              std::int64_t run, std::uint64_t runStride, std::uint64_t step, std::uint32_t k0,
                              std::uint32_t k1, float threshold, typename ElementArithmetic<T>::Compute scale) {
  using A = ElementArithmetic<T>;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint64_t position =
        run > 0 ? offset + static_cast<std::uint64_t>(i / run) * runStride + static_cast<std::uint64_t>(i % run)
                : offset + static_cast<std::uint64_t>(i);
    const float u = philox::uniform(position, step, k0, k1);
    y[i] = u >= threshold ? A::store(A::load(x[i]) * scale) : A::store(typename A::Compute(0));
  }
}

template <class T>
void launch(const DropoutLaunch& l) {
  constexpr int kThreads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((l.n + kThreads - 1) / kThreads, 65535 * 8);
  if (blocks == 0) return;
  using C = typename ElementArithmetic<T>::Compute;
  dropoutKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(l.stream)>>>(
      static_cast<const T*>(l.x), static_cast<T*>(l.y), l.n, l.offset, l.run, l.runStride, l.step, l.k0, l.k1, l.threshold,
      static_cast<C>(l.scale));
}

}  // namespace

const char* launchDropout(const DropoutLaunch& l) {
  return launchFor(l.element, [&](auto tag) { launch<typename decltype(tag)::type>(l); });
}

}  // namespace gradc::runtime::cuda
