#include "runtime/train/synthetic_inputs.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randint.h>

#include "ir/index_bounds.h"
#include "runtime/core/dtype_map.h"
#include "runtime/train/init.h"

namespace gradc::runtime {

namespace {

at::Tensor syntheticValues(const std::string& name, const ir::TensorType& type, std::int64_t bound, std::uint64_t seed,
                           std::int64_t step) {
  std::string key = name + "@" + std::to_string(step);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(parameterSeed(seed, key));
  at::TensorOptions options = at::TensorOptions().dtype(toScalarType(type.dtype));
  if (ir::isFloating(type.dtype)) return at::empty(type.shape, options).normal_(0.0, 1.0, gen);
  return at::randint(bound, type.shape, gen, options);
}

}  // namespace

at::Tensor syntheticInput(const ir::Value& input, std::uint64_t seed, std::int64_t step, int world, int rank) {
  std::int64_t bound = 2;
  if (std::optional<ir::IndexBound> b = ir::indexBound(input)) bound = b->bound;
  // An input that is not a batch (a fixed mask or table): one tensor for every step and rank.
  if (!input.isBatchedInput()) return syntheticValues(input.name(), input.type(), bound, seed, 0);
  if (world <= 1 || input.type().rank() == 0) return syntheticValues(input.name(), input.type(), bound, seed, step);
  // Rows [rank b, (rank + 1) b) of the full batch's values, in a tensor of their own.
  ir::TensorType full = input.type();
  const std::int64_t b = full.shape[0];
  full.shape[0] *= world;
  return syntheticValues(input.name(), full, bound, seed, step).narrow(0, rank * b, b).clone();
}

}  // namespace gradc::runtime
