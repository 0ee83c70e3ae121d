// Compiling a bundled spec (models/NAME.yaml) in tests, with --set style overrides. A spec that
// does not compile throws with its first diagnostic, which doctest reports as a test failure
// (no doctest macros here: runtime tests must include doctest after LibTorch's headers).
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "frontend/spec.h"

namespace gradc::testing {

using DimOverrides = std::vector<std::pair<std::string, std::string>>;

// The graph of a compiled spec, or a throw naming `what` and the first diagnostic.
inline ir::Graph graphOrThrow(frontend::SpecResult r, const std::string& what) {
  if (!r.ok())
    throw std::runtime_error(what + ": " +
                             (r.diagnostics.empty() ? std::string("does not compile") : r.diagnostics.front().message));
  return std::move(*r.graph);
}

inline ir::Graph compileBundledModel(const std::string& model, DimOverrides overrides = {}) {
  frontend::SpecOptions options;
  options.overrides = std::move(overrides);
  return graphOrThrow(
      frontend::compileSpecFile(std::string(GRADC_SOURCE_DIR) + "/models/" + model + ".yaml", options),
      "models/" + model + ".yaml");
}

// The same spec with its element type replaced (the top-level `dtype: f32` line), as
// `sed 's/^dtype: f32/dtype: bf16/'` would.
inline ir::Graph compileBundledModelAs(const std::string& model, const std::string& dtype, DimOverrides overrides = {}) {
  const std::string path = std::string(GRADC_SOURCE_DIR) + "/models/" + model + ".yaml";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string source = text.str();
  const size_t at = source.find("\ndtype: f32\n");
  if (at == std::string::npos) throw std::runtime_error("models/" + model + ".yaml: no top-level `dtype: f32` line");
  source.replace(at, 11, "\ndtype: " + dtype);
  frontend::SpecOptions options;
  options.overrides = std::move(overrides);
  return graphOrThrow(frontend::compileSpec(source, path, options), "models/" + model + ".yaml as " + dtype);
}

}  // namespace gradc::testing
