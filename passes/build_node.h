// The one way a pass creates a node of its own making (a seed, an accumulation, a collective,
// an optimizer update): ir::Graph::create, before `before` (appended when null), and a type-inference failure reported as the pass's internal error. A pass
// builds such nodes from operands it has already checked, so a failure is a bug of the pass's,
// never the user's input. Passes append by default: the insertion point is left at the end.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::passes {

inline Expected<ir::Node*> buildNode(ir::Graph& graph, std::string_view pass, std::string_view op,
                                     std::vector<ir::Value*> operands, ir::AttrMap attrs, ir::Phase phase,
                                     std::string specName, ir::Node* before = nullptr) {
  graph.setInsertionPoint(before);
  Expected<ir::Node*> node = graph.create(op, operands, std::move(attrs), phase, std::move(specName));
  graph.setInsertionPoint(nullptr);
  if (!node) return internalError(pass, "cannot build '" + std::string(op) + "': " + node.error().message);
  return node;
}

}  // namespace gradc::passes
