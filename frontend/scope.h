// Names of values while layers are lowered: graph inputs, `output:` bindings, `_` (the
// previous layer's output) and, inside a repeat, `x` (the block input). Each repeat
// iteration opens a child scope: names bound there are local to it; outer names stay readable.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/diag_sink.h"
#include "frontend/yaml_tree.h"
#include "ir/graph.h"

namespace gradc::frontend {

class Scope {
 public:
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}

  void bind(std::string_view name, ir::Value* value) { names_[std::string(name)] = value; }
  // Innermost binding of the name; nullptr when it is not defined here or in a parent.
  ir::Value* find(std::string_view name) const;
  // Every name readable here, innermost scope first, without duplicates.
  std::vector<std::string> visibleNames() const;

 private:
  const Scope* parent_;
  std::map<std::string, ir::Value*, std::less<>> names_;
};

// The value named by the scalar `node` (as in `input: h`), or nullptr after reporting
// where the name is not defined, with close matches or the list of defined names.
ir::Value* resolveName(const Scope& scope, const YamlNode& node, DiagSink& diags, std::string_view what);

}  // namespace gradc::frontend
