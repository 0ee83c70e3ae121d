// Compiling a spec for a subcommand: reads the file, applies --set overrides, prints
// diagnostics (warnings too) to stderr with source excerpts.
#pragma once

#include <optional>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace gradc::tools {

// What a compiled artifact records of the spec it came from.
struct SpecSource {
  std::string text;                                        // the spec file's bytes
  std::vector<std::pair<std::string, std::int64_t>> dims;  // every dim after --set, in spec order
};

// --set NAME=EXPR arguments as (name, expression) pairs, or nullopt after printing the error. An
// expression `auto` is refused here: only gradc compile and gradc train search a dim (the batch,
// tools/batch_choice.h), and they replace it before the spec is loaded.
std::optional<std::vector<std::pair<std::string, std::string>>> parseSetOverrides(const std::vector<std::string>& sets);

// The forward graph, or nullopt after the diagnostics were printed; `exitCode` says why.
std::optional<ir::Graph> loadSpec(const std::string& path, const std::vector<std::string>& sets, int& exitCode,
                                  SpecSource* source = nullptr);

}  // namespace gradc::tools
