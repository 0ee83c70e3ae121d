#include "passes/dce.h"

#include <unordered_set>

namespace gradc::passes {

Expected<bool> DeadCodeElimination::run(ir::Graph& graph) {
  std::unordered_set<const ir::Node*> live;
  auto nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node& node = **it;
    bool isLive = node.op().sideEffects;
    for (size_t r = 0; r < node.numResults() && !isLive; ++r) {
      const ir::Value* v = node.result(r);
      if (v->isGraphOutput()) isLive = true;
      for (const ir::Use& u : v->uses())
        if (live.count(u.user)) {
          isLive = true;
          break;
        }
    }
    if (isLive) live.insert(&node);
  }
  size_t removed = graph.eraseIf([&](const ir::Node& n) { return !live.count(&n); });
  return removed > 0;
}

}  // namespace gradc::passes
