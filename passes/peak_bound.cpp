#include "passes/peak_bound.h"

#include <algorithm>
#include <vector>

#include "passes/adjacency.h"
#include "passes/id_index.h"

namespace gradc::passes {

namespace {

// The graph's data edges over dense node indices (graph order), each edge once per list.
struct Dag {
  Lists producers, users;
  IdIndex<ir::Node> index;

  explicit Dag(const ir::Graph& graph) : index(graph.nodeIdBound()) {
    const size_t n = graph.numNodes();
    for (size_t i = 0; i < n; ++i) index.insert(graph.nodes()[i].get(), static_cast<int>(i));
    std::vector<std::pair<int, int>> userPairs;
    std::vector<int> lastUser(n, -1);  // the newest user recorded for each producer
    for (size_t i = 0; i < n; ++i) {
      const auto self = static_cast<int>(i);
      for (const ir::Value* v : graph.nodes()[i]->operands())
        if (const ir::Node* p = v->producer()) {
          const int j = index.get(p);
          if (lastUser[static_cast<size_t>(j)] == self) continue;
          lastUser[static_cast<size_t>(j)] = self;
          producers.items.push_back(j);
          userPairs.emplace_back(j, self);
        }
      producers.endRow();
    }
    users = Lists::fromPairs(n, userPairs);
  }
  size_t of(const ir::Node* node) const { return static_cast<size_t>(index.get(node)); }
};

// Marks everything reachable from `from` (included) along `edges`.
void reach(const Lists& edges, size_t from, std::vector<char>& mark) {
  std::fill(mark.begin(), mark.end(), 0);
  std::vector<size_t> stack{from};
  mark[from] = 1;
  while (!stack.empty()) {
    const size_t x = stack.back();
    stack.pop_back();
    for (int e : edges[x]) {
      const auto y = static_cast<size_t>(e);
      if (!mark[y]) {
        mark[y] = 1;
        stack.push_back(y);
      }
    }
  }
}

// Union-find over node indices.
struct Components {
  std::vector<size_t> parent;
  explicit Components(size_t n) : parent(n) {
    for (size_t i = 0; i < n; ++i) parent[i] = i;
  }
  size_t find(size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
};

std::int64_t boundAt(const ir::Graph& graph, const StorageModel& storage, const Dag& dag, size_t target,
                     std::vector<char>& ancestor, std::vector<char>& descendant) {
  const size_t n = graph.numNodes();
  reach(dag.producers, target, ancestor);
  reach(dag.users, target, descendant);
  const ir::Node& at = *graph.nodes()[target];
  auto producedBefore = [&](const ir::Value* owner) {
    return owner->kind() == ir::ValueKind::Result && ancestor[dag.of(owner->producer())];
  };

  // Forced by a path through `at`: produced by an ancestor, read by a descendant or kept.
  IdIndex<ir::Value> counted(graph.valueIdBound());
  std::int64_t bytes = storage.workspaceBytes(&at);
  auto count = [&](const ir::Value* owner) {
    if (producedBefore(owner) && counted.insert(owner, 1)) bytes += owner->type().bytes();
  };
  for (size_t r = 0; r < at.numResults(); ++r) count(storage.owner(at.result(r)));
  for (size_t i = 0; i < n; ++i) {
    if (!descendant[i]) continue;
    for (const ir::Value* v : graph.nodes()[i]->operands()) count(storage.owner(v));
  }
  for (const ir::GraphOutput& out : graph.outputs()) count(storage.owner(out.value));

  // Forced by paths around `at`: the unrelated nodes (neither ancestors nor descendants) fall
  // into components (joined by data edges and by reading the same ancestor-produced buffer).
  // A component that reads an ancestor's buffer and feeds a descendant carries a path from
  // before `at` to after it, so one of its buffers is alive while `at` runs, whatever the
  // order: the component adds its smallest candidate (the ancestor buffers it reads, the
  // buffers it produces), unless a buffer it reads is already counted above. Candidates of
  // different components are disjoint, so the sum stays a bound.
  auto unrelated = [&](size_t i) { return !ancestor[i] && !descendant[i]; };
  Components components(n);
  IdIndex<ir::Value> firstReader(graph.valueIdBound());  // ancestor buffer -> first unrelated reader
  for (size_t i = 0; i < n; ++i) {
    if (!unrelated(i)) continue;
    for (int p : dag.producers[i])
      if (unrelated(static_cast<size_t>(p))) components.join(i, static_cast<size_t>(p));
    for (const ir::Value* v : graph.nodes()[i]->operands()) {
      const ir::Value* owner = storage.owner(v);
      if (!producedBefore(owner)) continue;
      if (!firstReader.insert(owner, static_cast<int>(i))) components.join(i, static_cast<size_t>(firstReader.get(owner)));
    }
  }
  constexpr std::int64_t kNone = -1;
  std::vector<std::int64_t> smallest(n, kNone);
  std::vector<char> entered(n, 0), feeds(n, 0), spoiled(n, 0);
  auto offer = [&](size_t root, std::int64_t b) {
    if (smallest[root] == kNone || b < smallest[root]) smallest[root] = b;
  };
  for (size_t i = 0; i < n; ++i) {
    if (!unrelated(i)) continue;
    const size_t root = components.find(i);
    const ir::Node& node = *graph.nodes()[i];
    for (const ir::Value* v : node.operands()) {
      const ir::Value* owner = storage.owner(v);
      if (!producedBefore(owner)) continue;
      entered[root] = 1;
      if (counted.get(owner) >= 0) spoiled[root] = 1;
      offer(root, owner->type().bytes());
    }
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* owner = storage.owner(node.result(r));
      if (owner->kind() == ir::ValueKind::Result && owner->producer() == &node) offer(root, owner->type().bytes());
    }
    for (int u : dag.users[i])
      if (descendant[static_cast<size_t>(u)]) feeds[root] = 1;
  }
  for (size_t i = 0; i < n; ++i)
    if (unrelated(i) && components.find(i) == i && entered[i] && feeds[i] && !spoiled[i] && smallest[i] > 0)
      bytes += smallest[i];

  for (const auto& p : graph.params()) bytes += p->type().bytes();
  for (const auto& in : graph.inputs()) bytes += in->type().bytes();
  return bytes;
}

}  // namespace

std::int64_t peakLowerBound(const ir::Graph& graph, const StorageModel& storage, const ir::Node& at) {
  const Dag dag(graph);
  std::vector<char> ancestor(graph.numNodes()), descendant(graph.numNodes());
  return boundAt(graph, storage, dag, dag.of(&at), ancestor, descendant);
}

std::int64_t peakLowerBoundNear(const ir::Graph& graph, const StorageModel& storage,
                                std::span<const ir::Node* const> order, int step, int spineNodes) {
  const size_t n = graph.numNodes();
  if (n == 0 || step < 0 || static_cast<size_t>(step) >= order.size()) {
    std::int64_t bytes = 0;
    for (const auto& p : graph.params()) bytes += p->type().bytes();
    for (const auto& in : graph.inputs()) bytes += in->type().bytes();
    return bytes;
  }
  const Dag dag(graph);
  // Longest paths from the sources (depth) and to the sinks (height), in graph order, which
  // is topological.
  std::vector<int> depth(n, 0), height(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int p : dag.producers[i]) depth[i] = std::max(depth[i], depth[static_cast<size_t>(p)] + 1);
  int longest = 0;
  for (size_t i = n; i-- > 0;) {
    for (int u : dag.users[i]) height[i] = std::max(height[i], height[static_cast<size_t>(u)] + 1);
    longest = std::max(longest, depth[i] + height[i]);
  }
  // Candidates: the node at `step`, then the spine nodes nearest it in `order`, alternating
  // before and after.
  std::vector<size_t> targets{dag.of(order[static_cast<size_t>(step)])};
  auto onSpine = [&](size_t i) { return depth[i] + height[i] == longest; };
  int before = step - 1, after = step + 1, found = 0;
  const int steps = static_cast<int>(order.size());
  while (found < spineNodes && (before >= 0 || after < steps)) {
    for (int* cursor : {&before, &after}) {
      const bool forward = cursor == &after;
      while (*cursor >= 0 && *cursor < steps && !onSpine(dag.of(order[static_cast<size_t>(*cursor)])))
        *cursor += forward ? 1 : -1;
      if (*cursor >= 0 && *cursor < steps && found < spineNodes) {
        targets.push_back(dag.of(order[static_cast<size_t>(*cursor)]));
        ++found;
        *cursor += forward ? 1 : -1;
      }
    }
  }
  std::vector<char> ancestor(n), descendant(n);
  std::int64_t best = 0;
  for (size_t t : targets) best = std::max(best, boundAt(graph, storage, dag, t, ancestor, descendant));
  return best;
}

}  // namespace gradc::passes
