// Compiling a spec for a subcommand: reads the file, applies --set overrides, prints
// diagnostics (warnings too) to stderr with source excerpts.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc::tools {

// The forward graph, or nullopt after the diagnostics were printed; `exitCode` says why.
std::optional<ir::Graph> loadSpec(const std::string& path, const std::vector<std::string>& sets, int& exitCode);

}  // namespace gradc::tools
