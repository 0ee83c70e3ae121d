// How gradc's CUDA kernels compute on an element type: f32 and f64 in themselves, f16 and bf16
// in f32, rounded once on the way back (as the CPU kernels round); and the launch of a kernel
// for the element type a launcher names.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "runtime/cuda/element.h"

namespace gradc::runtime::cuda {

template <class T>
struct ElementArithmetic {
  using Compute = T;
  __device__ static Compute load(T v) { return v; }
  __device__ static T store(Compute v) { return v; }
};
template <>
struct ElementArithmetic<__half> {
  using Compute = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct ElementArithmetic<__nv_bfloat16> {
  using Compute = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <class T>
struct ElementTag {
  using type = T;
};

// Calls launch(ElementTag<T>{}) for the element type T of `element`, then returns the CUDA
// runtime's error string for what it launched, or nullptr.
template <class Launch>
const char* launchFor(Element element, Launch&& launch) {
  switch (element) {
    case Element::f32: launch(ElementTag<float>{}); break;
    case Element::f64: launch(ElementTag<double>{}); break;
    case Element::f16: launch(ElementTag<__half>{}); break;
    case Element::bf16: launch(ElementTag<__nv_bfloat16>{}); break;
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace gradc::runtime::cuda
