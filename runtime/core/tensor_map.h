// Named tensors: parameters, optimizer state, graph inputs and outputs. Ordered by name so
// that iteration (and everything written from it) is deterministic.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace gradc::runtime {

using TensorMap = std::map<std::string, at::Tensor, std::less<>>;

}  // namespace gradc::runtime
