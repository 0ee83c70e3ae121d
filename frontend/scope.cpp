// Value name lookup for spec layers; see scope.h.
#include "frontend/scope.h"

#include <set>

#include "frontend/spec_values.h"
#include "frontend/suggest.h"

namespace gradc::frontend {

ir::Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    auto it = s->names_.find(name);
    if (it != s->names_.end()) return it->second;
  }
  return nullptr;
}

std::vector<std::string> Scope::visibleNames() const {
  std::vector<std::string> out;
  std::set<std::string_view> seen;
  for (const Scope* s = this; s; s = s->parent_)
    for (const auto& [name, value] : s->names_)
      if (seen.insert(name).second) out.push_back(name);
  return out;
}

ir::Value* resolveName(const Scope& scope, const YamlNode& node, DiagSink& diags, std::string_view what) {
  std::optional<std::string_view> name = readScalar(node, diags, what);
  if (!name) return nullptr;
  if (ir::Value* v = scope.find(*name)) return v;
  std::vector<std::string> names = scope.visibleNames();
  if (*name == "_") {
    diags.error(node.pos, "'_' (the previous layer's output) is not defined here: no layer comes before this one",
                names.empty() ? std::string() : "read a defined value instead: " + quotedList(names));
    return nullptr;
  }
  std::string hint = didYouMean(*name, names);
  if (hint.empty()) hint = names.empty() ? "no values are defined yet" : "defined here: " + quotedList(names);
  diags.error(node.pos, "'" + clip(*name) + "' is not defined at this point", hint);
  return nullptr;
}

}  // namespace gradc::frontend
