// The element types gradc's own CUDA kernels are instantiated for, named without CUDA headers
// so that the C++ side (runtime/cuda/cuda_device.cpp) can choose one.
#pragma once

namespace gradc::runtime::cuda {

enum class Element { f32, f64, f16, bf16 };

}  // namespace gradc::runtime::cuda
