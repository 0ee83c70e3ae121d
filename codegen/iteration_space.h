// The loop a fused kernel runs: the node's iteration space with its operands' broadcasting,
// reduced to the fewest dimensions that describe it.
//
// Each operand is read through its own strides in elements (contiguous unless given: a fused
// node's `strides` attribute, ir/fused_body.h). Extents of 1 are dropped, and neighbouring
// dimensions merge when every operand steps through both as through one (outer stride = inner
// stride x inner extent), which holds when it is broadcast along both (stride 0) or contiguous
// across them: so [B, T, C] + [C] stays two dimensions, [B*T, C], an operand with the full
// shape reads one flat run, and a column slice [B, H] of a [B, 4H] buffer keeps its rows. Each
// operand then has, per dimension, its stride: 0 where it is broadcast. Results always span
// every dimension and are contiguous in the iteration order.
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

// `operands` must broadcast to `space` (the verifier checked it for a fused node). `strides`:
// per operand, one stride per dimension of its own shape; empty: every operand contiguous.
IterationSpace iterationSpaceOf(const ir::Shape& space, std::span<const ir::TensorType> operands,
                                std::span<const std::vector<std::int64_t>> strides = {});

}  // namespace gradc::codegen
