// Operand types and attribute maps the op table's tests (op_table_test.cpp,
// workspace_rules_test.cpp) build their cases from.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/attribute.h"
#include "ir/tensor_type.h"

namespace gradc::ir::op_cases {

inline TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
inline TensorType i64(Shape s) { return {DType::i64, std::move(s)}; }
inline TensorType bf16(Shape s) { return {DType::bf16, std::move(s)}; }
// An integer attribute value (a bare literal would be ambiguous between the attribute kinds).
inline std::int64_t I(std::int64_t v) { return v; }

// conv2d's attributes, square.
inline AttrMap conv(std::int64_t stride, std::int64_t padding, std::int64_t dilation, std::int64_t groups) {
  return {{"stride", std::vector<std::int64_t>{stride, stride}},
          {"padding", std::vector<std::int64_t>{padding, padding}},
          {"dilation", std::vector<std::int64_t>{dilation, dilation}},
          {"groups", groups}};
}

}  // namespace gradc::ir::op_cases
