#include "tools/spec_loading.h"

#include <iostream>

#include "frontend/spec.h"
#include "tools/commands.h"
#include "tools/output.h"

namespace gradc::tools {

std::optional<std::vector<std::pair<std::string, std::string>>> parseSetOverrides(const std::vector<std::string>& sets) {
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const std::string& kv : sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "gradc: error: --set expects NAME=EXPR, got '" << kv << "'\n";
      return std::nullopt;
    }
    if (kv.substr(eq + 1) == "auto") {
      std::cerr << "gradc: error: --set " << kv << ": only gradc compile and gradc train choose a dim, the batch, "
                << "with --budget (the largest batch whose step fits)\n";
      return std::nullopt;
    }
    overrides.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return overrides;
}

std::optional<ir::Graph> loadSpec(const std::string& path, const std::vector<std::string>& sets, int& exitCode,
                                  SpecSource* sourceOut) {
  exitCode = kExitUserError;
  frontend::SpecOptions options;
  std::optional<std::vector<std::pair<std::string, std::string>>> overrides = parseSetOverrides(sets);
  if (!overrides) return std::nullopt;
  options.overrides = std::move(*overrides);
  Expected<std::string> source = readInput(path, static_cast<size_t>(options.maxSourceBytes));
  if (!source) {
    std::cerr << "gradc: error: " << source.error().message << "\n";
    return std::nullopt;
  }
  frontend::SpecResult result = frontend::compileSpec(*source, path, options);
  for (const frontend::Diagnostic& d : result.diagnostics) std::cerr << frontend::formatDiagnostic(d, *source);
  if (!result.ok()) return std::nullopt;
  if (sourceOut) *sourceOut = {std::move(*source), std::move(result.dims)};
  exitCode = kExitOk;
  return std::move(result.graph);
}

}  // namespace gradc::tools
