#include "codegen/iteration_space.h"

#include <cassert>

namespace gradc::codegen {

std::int64_t IterationSpace::numel() const {
  std::int64_t n = 1;
  for (std::int64_t e : extents) n *= e;
  return n;
}

IterationSpace iterationSpaceOf(const ir::Shape& space, std::span<const ir::TensorType> operands,
                                std::span<const std::vector<std::int64_t>> strides) {
  assert(strides.empty() || strides.size() == operands.size());
  const size_t rank = space.size();
  // stride[k][d]: operand k's stride along dimension d of `space`, 0 where it is broadcast.
  std::vector<std::vector<std::int64_t>> stride(operands.size(), std::vector<std::int64_t>(rank, 0));
  for (size_t k = 0; k < operands.size(); ++k) {
    const ir::Shape& shape = operands[k].shape;
    const size_t offset = rank - shape.size();
    std::int64_t contiguous = 1;
    for (size_t d = rank; d-- > offset;) {
      const std::int64_t own = strides.empty() ? contiguous : strides[k][d - offset];
      contiguous *= shape[d - offset];
      if (shape[d - offset] == space[d]) stride[k][d] = own;
    }
  }
  IterationSpace out;
  out.strides.resize(operands.size());
  for (size_t d = 0; d < rank; ++d) {
    if (space[d] == 1) continue;
    bool merge = !out.extents.empty();
    for (size_t k = 0; merge && k < operands.size(); ++k) merge = out.strides[k].back() == stride[k][d] * space[d];
    if (merge) out.extents.back() *= space[d];
    else out.extents.push_back(space[d]);
    for (size_t k = 0; k < operands.size(); ++k) {
      if (merge) out.strides[k].back() = stride[k][d];
      else out.strides[k].push_back(stride[k][d]);
    }
  }
  if (out.extents.empty()) {
    out.extents.push_back(1);
    for (auto& s : out.strides) s.push_back(0);
  }
  return out;
}

}  // namespace gradc::codegen
