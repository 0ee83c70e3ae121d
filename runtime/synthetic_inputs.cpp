#include "runtime/synthetic_inputs.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/randint.h>

#include "ir/index_bounds.h"
#include "runtime/dtype_map.h"
#include "runtime/init.h"

namespace gradc::runtime {

at::Tensor syntheticInput(const ir::Value& input, std::uint64_t seed, std::int64_t step) {
  const ir::TensorType& type = input.type();
  std::string key = input.name() + "@" + std::to_string(step);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(parameterSeed(seed, key));
  at::TensorOptions options = at::TensorOptions().dtype(toScalarType(type.dtype));
  if (ir::isFloating(type.dtype)) return at::empty(type.shape, options).normal_(0.0, 1.0, gen);
  std::int64_t bound = 2;
  if (std::optional<ir::IndexBound> b = ir::indexBound(input)) bound = b->bound;
  return at::randint(bound, type.shape, gen, options);
}

}  // namespace gradc::runtime
