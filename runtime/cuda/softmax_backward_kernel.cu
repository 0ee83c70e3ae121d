// The CUDA softmax backward (runtime/cuda/softmax_backward_kernel.h). One block of kThreads
// threads per line of `size` elements, stride `inner` apart: each thread sums g * y over its
// elements in the accumulation type, the block reduces the partial sums (warp shuffles, then
// one value per warp in shared memory), and each thread writes its elements y * (g - sum).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/cuda/element_arithmetic.cuh"
#include "runtime/cuda/softmax_backward_kernel.h"

namespace gradc::runtime::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// The sum of `v` over the block, returned to every thread.
template <class A>
__device__ A blockSum(A v) {
  __shared__ A perWarp[kWarps];
  __shared__ A total;
  for (int shift = 16; shift > 0; shift /= 2) v += __shfl_down_sync(0xffffffffu, v, shift);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) perWarp[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < kWarps ? perWarp[lane] : A(0);
    for (int shift = 16; shift > 0; shift /= 2) w += __shfl_down_sync(0xffffffffu, w, shift);
    if (lane == 0) total = w;
  }
  __syncthreads();
  return total;
}

template <class T>
__global__ void softmaxBackwardKernel(const T* __restrict__ g, const T* __restrict__ y, T* __restrict__ out,
                                      std::int64_t size, std::int64_t inner) {
  using A = ElementArithmetic<T>;  // f16/bf16 accumulate in f32
  using Acc = typename A::Compute;
  const std::int64_t line = blockIdx.x;
  const std::int64_t base = (line / inner) * size * inner + line % inner;
  Acc partial = 0;
  for (std::int64_t j = threadIdx.x; j < size; j += kThreads) {
    const std::int64_t at = base + j * inner;
    partial += A::load(g[at]) * A::load(y[at]);
  }
  const Acc sum = blockSum(partial);
  for (std::int64_t j = threadIdx.x; j < size; j += kThreads) {
    const std::int64_t at = base + j * inner;
    out[at] = A::store(A::load(y[at]) * (A::load(g[at]) - sum));
  }
}

template <class T>
void launch(const SoftmaxBackwardLaunch& l) {
  const std::int64_t lines = l.outer * l.inner;
  if (lines == 0 || l.size == 0) return;
  softmaxBackwardKernel<T><<<static_cast<unsigned>(lines), kThreads, 0, static_cast<cudaStream_t>(l.stream)>>>(
      static_cast<const T*>(l.grad), static_cast<const T*>(l.y), static_cast<T*>(l.out), l.size, l.inner);
}

}  // namespace

const char* launchSoftmaxBackward(const SoftmaxBackwardLaunch& l) {
  if (l.outer * l.inner > 0x7fffffffLL) return "more than 2^31 - 1 lines";
  return launchFor(l.element, [&](auto tag) { launch<typename decltype(tag)::type>(l); });
}

}  // namespace gradc::runtime::cuda
