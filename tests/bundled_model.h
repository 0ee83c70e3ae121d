// Compiling a bundled spec (models/NAME.yaml) in tests, with --set style overrides. A spec that
// does not compile throws with its first diagnostic, which doctest reports as a test failure
// (no doctest macros here: runtime tests must include doctest after LibTorch's headers).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "frontend/spec.h"

namespace gradc::testing {

using DimOverrides = std::vector<std::pair<std::string, std::string>>;

inline ir::Graph compileBundledModel(const std::string& model, DimOverrides overrides = {}) {
  frontend::SpecOptions options;
  options.overrides = std::move(overrides);
  frontend::SpecResult r = frontend::compileSpecFile(std::string(GRADC_SOURCE_DIR) + "/models/" + model + ".yaml", options);
  if (!r.ok())
    throw std::runtime_error("models/" + model + ".yaml: " +
                             (r.diagnostics.empty() ? std::string("does not compile") : r.diagnostics.front().message));
  return std::move(*r.graph);
}

}  // namespace gradc::testing
