#include "ir/printer.h"

#include <algorithm>

namespace gradc::ir {

namespace {
bool isBareNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}
}  // namespace

std::string formatName(const std::string& name) {
  bool bare = !name.empty() && std::all_of(name.begin(), name.end(), isBareNameChar) &&
              !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
  return bare ? name : toString(Attribute{name});  // quoted with escapes
}

ValueNames::ValueNames(const Graph& graph) {
  size_t next = 0;
  for (const auto& node : graph.nodes())
    for (size_t i = 0; i < node->numResults(); ++i) resultNumbers_.emplace(node->result(i), next++);
}

std::string ValueNames::operator()(const Value* value) const {
  if (value->kind() != ValueKind::Result) return "%" + formatName(value->name());
  auto it = resultNumbers_.find(value);
  return it == resultNumbers_.end() ? "%<unknown>" : "%" + std::to_string(it->second);
}

std::string printNode(const Node& node, const ValueNames& names) {
  std::string line;
  for (size_t i = 0; i < node.numResults(); ++i) line += (i ? ", " : "") + names(node.result(i));
  if (node.numResults()) line += " = ";
  line += node.opName();
  line += "(";
  for (size_t i = 0; i < node.operands().size(); ++i) line += (i ? ", " : "") + names(node.operand(i));
  line += ")";
  if (!node.attrs().empty()) line += " " + toString(node.attrs());
  line += " : ";
  if (node.numResults() == 0) line += "()";
  for (size_t i = 0; i < node.numResults(); ++i) line += (i ? ", " : "") + toString(node.result(i)->type());
  line += " ";
  line += phaseName(node.phase());
  if (!node.specName().empty()) {
    const std::string& spec = node.specName();
    bool plain = spec.front() != '"' && spec.front() != ' ' && spec.back() != ' ' &&
                 std::none_of(spec.begin(), spec.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; });
    line += "  # " + (plain ? spec : toString(Attribute{spec}));
  }
  return line;
}

std::string printGraph(const Graph& graph) {
  ValueNames names(graph);
  std::string out = "graph " + formatName(graph.name());
  if (!graph.attrs().empty()) out += " " + toString(graph.attrs());
  out += "\n";
  for (const auto& v : graph.inputs()) {
    out += "  input " + names(v.get()) + " : " + toString(v->type());
    if (!v->attrs().empty()) out += " " + toString(v->attrs());
    out += "\n";
  }
  for (const auto& v : graph.params()) {
    out += "  param " + names(v.get()) + " : " + toString(v->type());
    if (!v->attrs().empty()) out += " " + toString(v->attrs());
    out += "\n";
  }
  for (const auto& node : graph.nodes()) out += "  " + printNode(*node, names) + "\n";
  for (const auto& o : graph.outputs()) out += "  output " + formatName(o.name) + " = " + names(o.value) + "\n";
  return out;
}

}  // namespace gradc::ir
