// The CUDA kernels' element type of an ATen scalar type (runtime/cuda/element.h), for the C++
// side that launches them.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "runtime/cuda/element.h"

namespace gradc::runtime::cuda {

inline std::optional<Element> elementOf(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return Element::f32;
    case at::kDouble: return Element::f64;
    case at::kHalf: return Element::f16;
    case at::kBFloat16: return Element::bf16;
    default: return std::nullopt;
  }
}

}  // namespace gradc::runtime::cuda
