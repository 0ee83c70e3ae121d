#include "passes/memory/liveness.h"

#include <algorithm>
#include <cassert>

namespace gradc::passes {

Liveness analyzeLiveness(const ir::Graph& graph) {
  std::vector<const ir::Node*> order;
  order.reserve(graph.numNodes());
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  return analyzeLiveness(graph, analyzeStorage(graph), order);
}

Liveness analyzeLiveness(const ir::Graph& graph, const StorageModel& storage, std::span<const ir::Node* const> order) {
  const StepGraph step = buildStepGraph(StepFacts(graph, storage));
  std::vector<int> indexById(graph.nodeIdBound(), -1);
  for (size_t i = 0; i < step.size(); ++i) indexById[step.nodes[i]->id()] = static_cast<int>(i);
  std::vector<int> indices;
  indices.reserve(order.size());
  for (const ir::Node* node : order) indices.push_back(indexById[node->id()]);
  return analyzeLiveness(graph, storage, step, indices);
}

Liveness analyzeLiveness(const ir::Graph& graph, const StorageModel& storage, const StepGraph& step,
                         std::span<const int> order) {
  LiveSweep sweep = liveSweep(step, order);
  Liveness l;
  l.bufferOf = IdIndex<ir::Value>(graph.valueIdBound());
  const int steps = static_cast<int>(order.size());
  const int last = std::max(steps - 1, 0);
  for (const ir::Value* v : persistentValues(graph)) {
    l.bufferOf.insert(v, static_cast<int>(l.buffers.size()));
    l.buffers.push_back(Buffer{storageRoleOf(*v).kind, Residency::Persistent, v->type().bytes(), 0, last, v, {}});
    l.persistentBytes += v->type().bytes();
  }
  assert(l.persistentBytes == step.persistentBytes);

  l.workspaceBytes.assign(static_cast<size_t>(steps), 0);
  l.copyBytes.assign(static_cast<size_t>(steps), 0);
  for (int s = 0; s < steps; ++s) {
    const auto index = static_cast<size_t>(order[static_cast<size_t>(s)]);
    const ir::Node& node = *step.nodes[index];
    l.workspaceBytes[static_cast<size_t>(s)] = step.workspace[index];
    l.copyBytes[static_cast<size_t>(s)] = storage.copyBytes(&node);
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* v = node.result(r);
      if (storage.isView(v)) {
        const auto source = static_cast<size_t>(l.bufferOf.get(storage.owner(v)));
        l.bufferOf.insert(v, static_cast<int>(source));
        l.buffers[source].aliases.push_back(v);
        continue;
      }
      const auto group = static_cast<size_t>(step.valueGroup[v->id()]);
      assert(sweep.groupFirst[group] == s);
      const StorageRole role = storageRoleOf(*v);
      l.bufferOf.insert(v, static_cast<int>(l.buffers.size()));
      l.buffers.push_back(
          Buffer{role.kind, role.residency, step.groupBytes[group], sweep.groupFirst[group], sweep.groupLast[group], v, {}});
    }
  }
  l.liveBytes = std::move(sweep.liveBytes);
  l.peakBytes = sweep.peak.bytes;
  l.peakStep = sweep.peak.step;
  return l;
}

}  // namespace gradc::passes
