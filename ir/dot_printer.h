// Graphviz rendering of a graph: one box per node (op, result types, spec name), inputs and
// parameters as ellipses, edges labelled with the operand's type. Nodes are coloured by
// phase. Output is deterministic (names from ValueNames, program order).
#pragma once

#include <string>

#include "ir/graph.h"

namespace gradc::ir {

std::string printDot(const Graph& graph);

}  // namespace gradc::ir
