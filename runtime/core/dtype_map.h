// IR element types <-> ATen scalar types.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "ir/dtype.h"

namespace gradc::runtime {

inline c10::ScalarType toScalarType(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::f32: return c10::ScalarType::Float;
    case ir::DType::f64: return c10::ScalarType::Double;
    case ir::DType::f16: return c10::ScalarType::Half;
    case ir::DType::bf16: return c10::ScalarType::BFloat16;
    case ir::DType::i64: return c10::ScalarType::Long;
    case ir::DType::i32: return c10::ScalarType::Int;
    case ir::DType::boolean: return c10::ScalarType::Bool;
  }
  return c10::ScalarType::Undefined;
}

inline std::optional<ir::DType> fromScalarType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return ir::DType::f32;
    case c10::ScalarType::Double: return ir::DType::f64;
    case c10::ScalarType::Half: return ir::DType::f16;
    case c10::ScalarType::BFloat16: return ir::DType::bf16;
    case c10::ScalarType::Long: return ir::DType::i64;
    case c10::ScalarType::Int: return ir::DType::i32;
    case c10::ScalarType::Bool: return ir::DType::boolean;
    default: return std::nullopt;
  }
}

}  // namespace gradc::runtime
