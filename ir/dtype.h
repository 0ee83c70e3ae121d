// Element types of tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gradc::ir {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i64, i32, boolean };

// The spelling used in IR text and specs: "f32", "bf16", "i64", "bool", ...
std::string_view dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
// Bytes per element.
std::int64_t dtypeSize(DType dtype);
bool isFloating(DType dtype);
bool isInteger(DType dtype);

}  // namespace gradc::ir
