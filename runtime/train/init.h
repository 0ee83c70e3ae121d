// Parameter and optimizer-state initialisation from the graph's parameter attributes.
//
// Each parameter carries its initialiser (frontend: PyTorch's default per layer type):
// init = "uniform" (bound), "normal" (std), "ones", "zeros". Values come from a generator
// seeded by (seed, parameter name), so they do not depend on declaration order, on which
// other parameters exist, or on the thread count.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/core/tensor_map.h"

namespace gradc::runtime {

// Fresh tensors for every parameter of the graph (optimizer state included: init "zeros").
Expected<TensorMap> initParameters(const ir::Graph& graph, std::uint64_t seed);

// The generator seed for one parameter: a 64-bit mix of the run seed and the name.
std::uint64_t parameterSeed(std::uint64_t seed, std::string_view name);

}  // namespace gradc::runtime
