#include "ir/tensor_type.h"

#include <algorithm>
#include <cassert>

namespace gradc::ir {

std::optional<std::int64_t> checkedNumel(const Shape& shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) return std::nullopt;
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d <= 0 || d > kMaxElements) return std::nullopt;
    if (n > kMaxElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::int64_t TensorType::numel() const {
  std::optional<std::int64_t> n = checkedNumel(shape);
  assert(n && "tensor type with an invalid shape");
  return n ? *n : 0;
}

std::string shapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string toString(const TensorType& type) {
  return std::string(dtypeName(type.dtype)) + shapeToString(type.shape);
}

std::optional<int> normalizeAxis(std::int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = std::max(da, db);
  }
  return out;
}

}  // namespace gradc::ir
