// Static tensor types: an element type and a shape with known, positive extents.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace gradc::ir {

// Any tensor gradc handles has at most this many elements (2^50, ~10^15). Shapes beyond it are
// rejected where they are built, so element and byte counts never overflow int64.
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 50;
inline constexpr int kMaxRank = 8;

using Shape = std::vector<std::int64_t>;

// Product of extents; nullopt if an extent is not positive or the product exceeds kMaxElements.
std::optional<std::int64_t> checkedNumel(const Shape& shape);

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  std::int64_t numel() const;  // requires a valid shape (see checkedNumel)
  std::int64_t bytes() const { return numel() * dtypeSize(dtype); }
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

// "f32[16, 128, 256]", "f32[]" for a scalar.
std::string toString(const TensorType& type);
std::string shapeToString(const Shape& shape);

// Normalises a possibly negative axis against a rank; nullopt when out of range.
std::optional<int> normalizeAxis(std::int64_t axis, int rank);

// Numpy/PyTorch broadcasting of two shapes; nullopt when they are incompatible.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);

}  // namespace gradc::ir
