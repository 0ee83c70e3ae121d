// Collects the diagnostics of one spec compilation, stamping each with the spec's file name.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frontend/spec.h"
#include "frontend/yaml_tree.h"

namespace gradc::frontend {

class DiagSink {
 public:
  explicit DiagSink(std::string file) : file_(std::move(file)) {}

  void error(SourcePos pos, std::string message, std::string hint = {}) {
    add(Severity::Error, pos, std::move(message), std::move(hint));
  }
  void warning(SourcePos pos, std::string message, std::string hint = {}) {
    add(Severity::Warning, pos, std::move(message), std::move(hint));
  }
  // A diagnostic without a source position in this file (e.g. about a --set option).
  void add(Diagnostic diag) {
    if (diag.severity == Severity::Error) failed_ = true;
    diags_.push_back(std::move(diag));
  }

  bool failed() const { return failed_; }
  const std::string& file() const { return file_; }
  std::vector<Diagnostic> take() { return std::move(diags_); }

 private:
  void add(Severity severity, SourcePos pos, std::string message, std::string hint) {
    add(Diagnostic{severity, file_, pos.line, pos.column, std::move(message), std::move(hint)});
  }

  std::string file_;
  std::vector<Diagnostic> diags_;
  bool failed_ = false;
};

}  // namespace gradc::frontend
