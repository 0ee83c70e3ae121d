#include "passes/peak_bound.h"

#include "passes/pointer_index.h"

#include <vector>

namespace gradc::passes {

std::int64_t peakLowerBound(const ir::Graph& graph, const StorageModel& storage, const ir::Node& at) {
  const size_t n = graph.numNodes();
  PointerIndex nodeIndex(n);
  for (size_t i = 0; i < n; ++i) nodeIndex.insert(graph.nodes()[i].get(), static_cast<int>(i));
  auto index = [&](const ir::Node* node) { return static_cast<size_t>(nodeIndex.get(node)); };
  const size_t target = index(&at);

  // Ancestors (at included): walk producers.
  std::vector<char> ancestor(n, 0), descendant(n, 0);
  std::vector<size_t> stack{target};
  ancestor[target] = 1;
  while (!stack.empty()) {
    const ir::Node& node = *graph.nodes()[stack.back()];
    stack.pop_back();
    for (const ir::Value* v : node.operands())
      if (const ir::Node* producer = v->producer()) {
        size_t p = index(producer);
        if (!ancestor[p]) {
          ancestor[p] = 1;
          stack.push_back(p);
        }
      }
  }
  // Descendants (at included): walk users.
  stack.assign(1, target);
  descendant[target] = 1;
  while (!stack.empty()) {
    const ir::Node& node = *graph.nodes()[stack.back()];
    stack.pop_back();
    for (size_t r = 0; r < node.numResults(); ++r)
      for (const ir::Use& use : node.result(r)->uses()) {
        size_t u = index(use.user);
        if (!descendant[u]) {
          descendant[u] = 1;
          stack.push_back(u);
        }
      }
  }

  // Buffers (owners) produced by an ancestor and read by a descendant, or kept as outputs.
  PointerIndex alive(n);  // owners counted
  std::int64_t bytes = storage.workspaceBytes(&at);
  auto count = [&](const ir::Value* owner) {
    if (owner->kind() != ir::ValueKind::Result) return;  // persistent: counted below
    if (!ancestor[index(owner->producer())]) return;
    if (alive.insert(owner, 1)) bytes += owner->type().bytes();
  };
  for (size_t r = 0; r < at.numResults(); ++r) count(storage.owner(at.result(r)));
  for (size_t i = 0; i < n; ++i) {
    if (!descendant[i]) continue;
    for (const ir::Value* v : graph.nodes()[i]->operands()) count(storage.owner(v));
  }
  for (const ir::GraphOutput& out : graph.outputs()) count(storage.owner(out.value));
  for (const auto& p : graph.params()) bytes += p->type().bytes();
  for (const auto& in : graph.inputs()) bytes += in->type().bytes();
  return bytes;
}

}  // namespace gradc::passes
