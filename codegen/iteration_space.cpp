#include "codegen/iteration_space.h"

#include <cassert>

namespace gradc::codegen {

std::int64_t IterationSpace::numel() const {
  std::int64_t n = 1;
  for (std::int64_t e : extents) n *= e;
  return n;
}

IterationSpace iterationSpaceOf(const ir::Shape& space, std::span<const ir::TensorType> operands) {
  const size_t rank = space.size();
  // spans[k][d]: operand k has the full extent along dimension d (else it is broadcast).
  std::vector<std::int64_t> extents;
  std::vector<std::vector<bool>> spans(operands.size());
  for (size_t d = 0; d < rank; ++d) {
    if (space[d] == 1) continue;
    std::vector<bool> column;
    for (const ir::TensorType& t : operands) {
      const size_t offset = rank - t.shape.size();
      column.push_back(d >= offset && t.shape[d - offset] == space[d]);
    }
    bool merge = !extents.empty();
    for (size_t k = 0; merge && k < operands.size(); ++k) merge = spans[k].back() == column[k];
    if (merge) {
      extents.back() *= space[d];
      continue;
    }
    extents.push_back(space[d]);
    for (size_t k = 0; k < operands.size(); ++k) spans[k].push_back(column[k]);
  }
  if (extents.empty()) {
    extents.push_back(1);
    for (auto& s : spans) s.push_back(true);
  }
  IterationSpace out{extents, {}};
  for (const auto& s : spans) {
    std::vector<std::int64_t> strides(extents.size(), 0);
    std::int64_t stride = 1;
    for (size_t d = extents.size(); d-- > 0;) {
      if (!s[d]) continue;
      strides[d] = stride;
      stride *= extents[d];
    }
    out.strides.push_back(std::move(strides));
  }
  return out;
}

}  // namespace gradc::codegen
