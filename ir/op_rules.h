// Building blocks shared by the op table's rule files (ir/ops.cpp, ir/ops_training.cpp) and the
// backends' workspace rules (runtime/<backend>/*_target.cpp, ir/kernel_target.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/op_table.h"

namespace gradc::ir {

// The parts of the op table: forward ops (what specs lower to), training ops (backward kernels
// and optimizer updates, created by the autodiff and optimizer passes) and collective ops
// (communication between data-parallel ranks, created by the data-parallel pass).
std::vector<OpInfo> forwardOps();
std::vector<OpInfo> trainingOps();
std::vector<OpInfo> collectiveOps();
std::vector<OpInfo> fusedLossOps();  // ir/ops_fused_loss.cpp
std::vector<OpInfo> transformerOps();  // ir/ops_transformer.cpp
std::vector<OpInfo> reductionOps();    // ir/ops_reductions.cpp
std::vector<OpInfo> fusedOps();        // ir/ops_fused.cpp
std::vector<OpInfo> convOps();         // ir/ops_conv.cpp
std::vector<OpInfo> batchNormOps();    // ir/ops_batch_norm.cpp
std::vector<OpInfo> shardOps();        // ir/ops_shard.cpp
std::vector<OpInfo> attentionOps();    // ir/ops_attention.cpp

namespace rules {

using Results = Expected<std::vector<TensorType>>;

// FLOP counts of shapes near the element limit can exceed int64: they saturate instead.
inline std::int64_t saturatingMul(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
inline std::int64_t saturatingAdd(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

inline Error fail(std::string message) { return Error{std::move(message)}; }

inline std::string typeStr(const TensorType& t) { return toString(t); }

// Checks that a derived shape is representable.
inline Results single(TensorType t) {
  if (!checkedNumel(t.shape)) return fail("result shape " + shapeToString(t.shape) + " is too large or not positive");
  return std::vector<TensorType>{std::move(t)};
}

inline Status requireFloat(const TensorType& t, std::string_view what) {
  if (!isFloating(t.dtype)) return Error{std::string(what) + " must be a floating-point tensor, got " + typeStr(t)};
  return {};
}

// ---- rule building blocks ------------------------------------------------------------------

inline Results inferUnaryFloat(const OpContext& c) {
  if (Status s = requireFloat(c.inputs[0], "the input"); !s) return s.error();
  return std::vector<TensorType>{c.inputs[0]};
}

inline Results inferBinaryBroadcast(const OpContext& c) {
  const TensorType& a = c.inputs[0];
  const TensorType& b = c.inputs[1];
  if (a.dtype != b.dtype) return fail("operand dtypes differ: " + typeStr(a) + " and " + typeStr(b));
  if (Status s = requireFloat(a, "operands"); !s) return s.error();
  std::optional<Shape> shape = broadcastShapes(a.shape, b.shape);
  if (!shape) return fail("shapes " + typeStr(a) + " and " + typeStr(b) + " do not broadcast");
  return single({a.dtype, *shape});
}

template <std::int64_t PerElement>
std::int64_t perResultElement(const OpContext&, std::span<const TensorType> r) {
  return PerElement * r[0].numel();
}

inline std::int64_t noFlops(const OpContext&, std::span<const TensorType>) { return 0; }

// One FLOP per element of the first operand (reductions, sum_to).
inline std::int64_t flopsPerFirstInput(const OpContext& c, std::span<const TensorType>) { return c.inputs[0].numel(); }

}  // namespace rules
}  // namespace gradc::ir
