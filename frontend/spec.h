// The YAML model spec frontend: spec text -> ir::Graph (forward pass + loss, static shapes).
//
// The language is documented in docs/spec.md. Every mistake in a spec is reported as a
// Diagnostic with file:line:col, what was expected and, where it helps, a hint (close matches
// for misspellings). No input may crash, hang or exhaust memory: file size, YAML alias
// expansion, dim values, expression evaluation and graph size are all bounded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace gradc::frontend {

enum class Severity { Error, Warning };

struct Diagnostic {
  Severity severity = Severity::Error;
  std::string file;
  int line = 0;  // 1-based; 0 when the problem has no location (e.g. an unknown --set name)
  int column = 0;  // 1-based
  std::string message;
  std::string hint;  // "did you mean 'linear'?"; empty when none
};

// "file:line:col: error: message", the source line with a caret under the column, then
// "  hint: ..." when there is one.
std::string formatDiagnostic(const Diagnostic& diag, std::string_view sourceText);

struct SpecOptions {
  // --set name=expr overrides, applied to `dims` (and `seed`) before anything is evaluated.
  std::vector<std::pair<std::string, std::string>> overrides;
  // Bounds that keep hostile inputs harmless.
  std::int64_t maxSourceBytes = 16 << 20;
  std::int64_t maxYamlNodes = 1'000'000;  // after alias expansion
  std::int64_t maxGraphNodes = 2'000'000;
};

struct SpecResult {
  std::optional<ir::Graph> graph;        // set on success
  std::vector<Diagnostic> diagnostics;  // errors (then no graph) and warnings
  std::vector<std::pair<std::string, std::int64_t>> dims;  // every dim's value, in spec order
  bool ok() const { return graph.has_value(); }
};

SpecResult compileSpec(std::string_view sourceText, std::string_view fileName, const SpecOptions& options = {});
// Reads the file (bounded by maxSourceBytes) and compiles it; an unreadable file is a Diagnostic.
SpecResult compileSpecFile(const std::string& path, const SpecOptions& options = {});

}  // namespace gradc::frontend
