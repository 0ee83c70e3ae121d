// What the bench tools share for their model argument: `--set name=value` overrides and
// compiling the spec with its first diagnostic reported as "TOOL: message".
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "frontend/spec.h"

namespace gradc::bench {

// "name=value" -> {name, value}; nullopt without '='.
inline std::optional<std::pair<std::string, std::string>> splitOverride(std::string_view kv) {
  const size_t eq = kv.find('=');
  if (eq == std::string_view::npos) return std::nullopt;
  return std::pair<std::string, std::string>{std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1))};
}

// The compiled spec, or nullopt after printing "TOOL: [PATH: ]first diagnostic" to stderr.
inline std::optional<frontend::SpecResult> compileBenchSpec(const char* tool, const std::string& path,
                                                            const frontend::SpecOptions& options,
                                                            bool namePath = false) {
  frontend::SpecResult spec = frontend::compileSpecFile(path, options);
  if (spec.ok()) return spec;
  std::fprintf(stderr, "%s: %s%s\n", tool, namePath ? (path + ": ").c_str() : "",
               spec.diagnostics.empty() ? "?" : spec.diagnostics.front().message.c_str());
  return std::nullopt;
}

}  // namespace gradc::bench
