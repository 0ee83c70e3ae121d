// The IR verifier: checks every invariant stated in ir/graph.h. Run after each pass that
// changed the graph (PassManager) and after parsing.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::ir {

// Ok, or an Error describing the first violation, naming the node as printed ("%12 = matmul
// ... # blocks.0.attn") so the message can be matched against IR dumps.
Status verify(const Graph& graph);

}  // namespace gradc::ir
