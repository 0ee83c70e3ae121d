// The loop a fused kernel runs: the node's iteration space with its operands' broadcasting,
// reduced to the fewest dimensions that describe it.
//
// Extents of 1 are dropped, and neighbouring dimensions merge when every operand either spans
// both or is broadcast along both (so [B, T, C] + [C] stays two dimensions, [B*T, C], and an
// operand with the full shape reads one flat run). Each operand then has, per dimension, a
// stride in elements over its own contiguous memory: 0 where it is broadcast. Results always
// span every dimension and are contiguous in the iteration order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/tensor_type.h"

namespace gradc::codegen {

struct IterationSpace {
  std::vector<std::int64_t> extents;              // at least one dimension (a scalar: [1])
  std::vector<std::vector<std::int64_t>> strides;  // per operand, per dimension; 0 = broadcast
  std::int64_t numel() const;
};

// `operands` must broadcast to `space` (the verifier checked it for a fused node).
IterationSpace iterationSpaceOf(const ir::Shape& space, std::span<const ir::TensorType> operands);

}  // namespace gradc::codegen
