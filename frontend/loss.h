// Lowering of the spec's `loss:` entry: cross_entropy or mse against a target input, which
// becomes the graph output "loss".
#pragma once

#include "frontend/lowering_state.h"
#include "frontend/scope.h"
#include "frontend/yaml_tree.h"

namespace gradc::frontend {

// Returns false after reporting an error.
bool lowerLoss(LoweringState& state, const YamlNode& loss, const Scope& scope);

}  // namespace gradc::frontend
