// The IR text format: deterministic, human-readable, and parsed back exactly by ir/parser.h
// (parse(print(g)) prints identically). Grammar, one declaration per line:
//
//   graph NAME {graph attrs}
//     input %tokens : i64[16, 128]
//     param %fc1.weight : f32[1024, 256] {bound = 0.0625, init = "uniform"}
//     %0 = embedding(%wte.weight, %tokens) : f32[16, 128, 256] fwd  # wte
//     %1, %2, %3 = layer_norm(%0, %ln.weight, %ln.bias) {eps = 1e-05} : f32[..], f32[..], f32[..] fwd  # ln
//     output loss = %57
//
// Node results are numbered %0, %1, ... in program order at print time, so the text never
// depends on pointers or on how the graph was built. Inputs and parameters print by name
// (quoted, %"...", when the name is all digits or has characters outside [A-Za-z0-9_.-]).
// Each node line ends with its phase and, after '#', the spec layer it came from.
// A line whose first non-blank character is '#' is a comment.
#pragma once

#include <string>
#include <unordered_map>

#include "ir/graph.h"

namespace gradc::ir {

std::string printGraph(const Graph& graph);

// Printed names of every value of a graph ("%12", "%fc1.weight"), for printers and messages.
class ValueNames {
 public:
  explicit ValueNames(const Graph& graph);
  std::string operator()(const Value* value) const;

 private:
  std::unordered_map<const Value*, size_t> resultNumbers_;
};

// One node as a line of IR text (without indentation or newline).
std::string printNode(const Node& node, const ValueNames& names);

// A name as it appears after '%' or in an output declaration: bare or quoted.
std::string formatName(const std::string& name);

}  // namespace gradc::ir
