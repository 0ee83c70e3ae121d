// Lowering of a `layers:` list: op layers in sequence, `repeat` blocks, input/output names.
#pragma once

#include <string>

#include "frontend/lowering_state.h"
#include "frontend/scope.h"
#include "frontend/yaml_tree.h"

namespace gradc::frontend {

// Repeat blocks may nest this deep.
inline constexpr int kMaxRepeatNesting = 16;

// Lowers every layer of `list` (a YAML sequence) in order. `prefix` is the enclosing scope
// ("" at the top, "blocks.3." inside a repeat). Binds `_` in `scope` to the last layer's
// output. Returns false after reporting the first error.
bool lowerLayers(LoweringState& state, const YamlNode& list, Scope& scope, const std::string& prefix, int depth);

}  // namespace gradc::frontend
