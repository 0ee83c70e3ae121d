#include "passes/strip_dropout.h"

#include <vector>

namespace gradc::passes {

Expected<bool> StripDropout::run(ir::Graph& graph) {
  std::vector<ir::Node*> dropouts;
  for (const auto& node : graph.nodes())
    if (node->op().evalIdentity) dropouts.push_back(node.get());
  for (ir::Node* node : dropouts) {
    graph.replaceAllUsesWith(node->result(), node->operand(0));
    graph.erase(node);
  }
  return !dropouts.empty();
}

}  // namespace gradc::passes
