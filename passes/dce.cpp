#include "passes/dce.h"

#include <vector>

namespace gradc::passes {

Expected<bool> DeadCodeElimination::run(ir::Graph& graph) {
  // Liveness by node id (dense, below nodeIdBound()), walking the program backwards: a node is
  // live if it has side effects, or a result is a graph output or read by a live node.
  std::vector<char> live(graph.nodeIdBound(), 0);
  size_t dead = 0;
  auto nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node& node = **it;
    bool isLive = node.op().sideEffects;
    for (size_t r = 0; r < node.numResults() && !isLive; ++r) {
      const ir::Value* v = node.result(r);
      if (v->isGraphOutput()) isLive = true;
      for (const ir::Use& u : v->uses())
        if (live[u.user->id()]) {
          isLive = true;
          break;
        }
    }
    live[node.id()] = isLive;
    dead += !isLive;
  }
  if (dead == 0) return false;
  size_t removed = graph.eraseIf([&](const ir::Node& n) { return !live[n.id()]; });
  return removed > 0;
}

}  // namespace gradc::passes
