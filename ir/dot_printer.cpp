#include "ir/dot_printer.h"

#include "ir/printer.h"

namespace gradc::ir {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string_view phaseColor(Phase phase) {
  switch (phase) {
    case Phase::fwd: return "#dbeafe";
    case Phase::bwd: return "#fde68a";
    case Phase::opt: return "#bbf7d0";
    case Phase::recompute: return "#fecaca";
    case Phase::comm: return "#e9d5ff";
  }
  return "white";
}

}  // namespace

std::string printDot(const Graph& graph) {
  ValueNames names(graph);
  std::string out = "digraph \"" + escape(graph.name()) + "\" {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  auto source = [&](const Value* v) {
    return v->kind() == ValueKind::Result ? "n" + names(v->producer()->result(0)).substr(1) : "v" + escape(v->name());
  };
  for (auto span : {graph.inputs(), graph.params()})
    for (const auto& v : span)
      out += "  \"" + source(v.get()) + "\" [shape=ellipse, label=\"" + escape(v->name()) + "\\n" +
             toString(v->type()) + "\"" + (v->kind() == ValueKind::Param ? ", style=dashed" : "") + "];\n";
  for (const auto& node : graph.nodes()) {
    std::string id = node->numResults() ? "n" + names(node->result(0)).substr(1) : "";
    if (id.empty()) id = "op" + std::to_string(*graph.indexOf(node.get()));
    std::string label = std::string(node->opName());
    for (size_t i = 0; i < node->numResults(); ++i) label += "\\n" + toString(node->result(i)->type());
    if (!node->specName().empty()) label += "\\n" + escape(node->specName());
    out += "  \"" + id + "\" [shape=box, style=filled, fillcolor=\"" + std::string(phaseColor(node->phase())) +
           "\", label=\"" + label + "\"];\n";
    for (const Value* operand : node->operands())
      out += "  \"" + source(operand) + "\" -> \"" + id + "\";\n";
  }
  for (const auto& o : graph.outputs()) {
    out += "  \"out_" + escape(o.name) + "\" [shape=doubleoctagon, label=\"" + escape(o.name) + "\"];\n";
    out += "  \"" + source(o.value) + "\" -> \"out_" + escape(o.name) + "\";\n";
  }
  return out + "}\n";
}

}  // namespace gradc::ir
