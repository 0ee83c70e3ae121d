// Synthetic values for graph inputs, for runs without a data set (--synthetic, benchmarks):
// a pure function of (seed, step, input name), so runs are reproducible and resumable.
// Floating inputs are standard normal; integer inputs are uniform in [0, bound) where bound is
// what their uses require (ir::indexBound: embedding rows, loss classes), or [0, 2) when no
// use constrains them.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "runtime/core/tensor_map.h"

namespace gradc::runtime {

// For data-parallel rank `rank` of `world` (input: the rank's shard, leading extent b): rows
// [rank b, (rank + 1) b) of the values the full batch would get. An input that is not batched
// (ir::Value::isBatchedInput) gets the same values at every step and on every rank.
at::Tensor syntheticInput(const ir::Value& input, std::uint64_t seed, std::int64_t step, int world = 1, int rank = 0);

}  // namespace gradc::runtime
