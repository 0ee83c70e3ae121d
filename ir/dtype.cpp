#include "ir/dtype.h"

namespace gradc::ir {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::int64_t size;
  bool floating;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::f32, "f32", 4, true},   {DType::f64, "f64", 8, true},
    {DType::f16, "f16", 2, true},   {DType::bf16, "bf16", 2, true},
    {DType::i64, "i64", 8, false},  {DType::i32, "i32", 4, false},
    {DType::boolean, "bool", 1, false},
};
const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<int>(dtype)]; }
}  // namespace

std::string_view dtypeName(DType dtype) { return info(dtype).name; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo& d : kDTypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::int64_t dtypeSize(DType dtype) { return info(dtype).size; }
bool isFloating(DType dtype) { return info(dtype).floating; }
bool isInteger(DType dtype) { return dtype == DType::i64 || dtype == DType::i32; }

}  // namespace gradc::ir
