#include "passes/memory/peak_bound.h"

#include <algorithm>
#include <vector>

namespace gradc::passes {

namespace {

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

std::int64_t boundAt(const StepGraph& g, size_t target, std::vector<char>& ancestor, std::vector<char>& descendant) {
  const size_t n = g.size();
  reach(g.producers, target, ancestor);
  reach(g.users, target, descendant);
  auto producedBefore = [&](int group) { return ancestor[static_cast<size_t>(g.groupProducer[static_cast<size_t>(group)])] != 0; };

  // Forced by a path through `at`: produced by an ancestor, read by a descendant or kept.
  // (The target's view results share an operand's group, which the target reads.)
  std::vector<char> counted(g.groupBytes.size(), 0);
  std::int64_t bytes = g.workspace[target];
  auto count = [&](int group) {
    const auto gi = static_cast<size_t>(group);
    if (!counted[gi] && producedBefore(group)) {
      counted[gi] = 1;
      bytes += g.groupBytes[gi];
    }
  };
  for (int grp = g.groupStart[target]; grp < g.groupStart[target + 1]; ++grp) count(grp);
  for (size_t i = 0; i < n; ++i)
    if (descendant[i])
      for (int grp : g.groupsRead[i]) count(grp);
  for (size_t grp = 0; grp < g.groupBytes.size(); ++grp)
    if (g.groupPinned[grp]) count(static_cast<int>(grp));

  // Forced by paths around `at`: the unrelated nodes (neither ancestors nor descendants) fall
  // into components (joined by data edges and by reading the same ancestor-produced buffer).
  // A component that reads an ancestor's buffer and feeds a descendant carries a path from
  // before `at` to after it, so one of its buffers is alive while `at` runs, whatever the
  // order: the component adds its smallest candidate (the ancestor buffers it reads, the
  // buffers it produces), unless a buffer it reads is already counted above. Candidates of
  // different components are disjoint, so the sum stays a bound.
  auto unrelated = [&](size_t i) { return !ancestor[i] && !descendant[i]; };
  Components components(n);
  std::vector<int> firstReader(g.groupBytes.size(), -1);  // ancestor buffer -> first unrelated reader
  for (size_t i = 0; i < n; ++i) {
    if (!unrelated(i)) continue;
    for (int p : g.producers[i])
      if (unrelated(static_cast<size_t>(p))) components.join(i, static_cast<size_t>(p));
    for (int grp : g.groupsRead[i]) {
      if (!producedBefore(grp)) continue;
      int& first = firstReader[static_cast<size_t>(grp)];
      if (first < 0) first = static_cast<int>(i);
      else components.join(i, static_cast<size_t>(first));
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
    for (int grp : g.groupsRead[i]) {
      if (!producedBefore(grp)) continue;
      entered[root] = 1;
      if (counted[static_cast<size_t>(grp)]) spoiled[root] = 1;
      offer(root, g.groupBytes[static_cast<size_t>(grp)]);
    }
    for (int grp = g.groupStart[i]; grp < g.groupStart[i + 1]; ++grp) offer(root, g.groupBytes[static_cast<size_t>(grp)]);
    for (int u : g.users[i])
      if (descendant[static_cast<size_t>(u)]) feeds[root] = 1;
  }
  for (size_t i = 0; i < n; ++i)
    if (unrelated(i) && components.find(i) == i && entered[i] && feeds[i] && !spoiled[i] && smallest[i] > 0)
      bytes += smallest[i];
  return bytes + g.persistentBytes;
}

std::vector<int> indicesOf(const ir::Graph& graph, std::span<const ir::Node* const> nodes) {
  std::vector<int> index(graph.nodeIdBound(), -1);
  for (size_t i = 0; i < graph.numNodes(); ++i) index[graph.nodes()[i]->id()] = static_cast<int>(i);
  std::vector<int> out;
  out.reserve(nodes.size());
  for (const ir::Node* n : nodes) out.push_back(index[n->id()]);
  return out;
}

}  // namespace

std::int64_t peakLowerBound(const StepGraph& graph, int node) {
  std::vector<char> ancestor(graph.size()), descendant(graph.size());
  return boundAt(graph, static_cast<size_t>(node), ancestor, descendant);
}

std::int64_t peakLowerBoundNear(const StepGraph& g, std::span<const int> order, int step, int spineNodes) {
  const size_t n = g.size();
  if (n == 0 || step < 0 || static_cast<size_t>(step) >= order.size()) return g.persistentBytes;
  // Longest paths from the sources (depth) and to the sinks (height), in graph order, which
  // is topological.
  std::vector<int> depth(n, 0), height(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int p : g.producers[i]) depth[i] = std::max(depth[i], depth[static_cast<size_t>(p)] + 1);
  int longest = 0;
  for (size_t i = n; i-- > 0;) {
    for (int u : g.users[i]) height[i] = std::max(height[i], height[static_cast<size_t>(u)] + 1);
    longest = std::max(longest, depth[i] + height[i]);
  }
  // Candidates: the node at `step`, then the spine nodes nearest it in `order`, alternating
  // before and after.
  auto nodeAt = [&](int s) { return static_cast<size_t>(order[static_cast<size_t>(s)]); };
  std::vector<size_t> targets{nodeAt(step)};
  auto onSpine = [&](size_t i) { return depth[i] + height[i] == longest; };
  int before = step - 1, after = step + 1, found = 0;
  const int steps = static_cast<int>(order.size());
  while (found < spineNodes && (before >= 0 || after < steps)) {
    for (int* cursor : {&before, &after}) {
      const bool forward = cursor == &after;
      while (*cursor >= 0 && *cursor < steps && !onSpine(nodeAt(*cursor))) *cursor += forward ? 1 : -1;
      if (*cursor >= 0 && *cursor < steps && found < spineNodes) {
        targets.push_back(nodeAt(*cursor));
        ++found;
        *cursor += forward ? 1 : -1;
      }
    }
  }
  std::vector<char> ancestor(n), descendant(n);
  std::int64_t best = 0;
  for (size_t t : targets) best = std::max(best, boundAt(g, t, ancestor, descendant));
  return best;
}

std::int64_t peakLowerBound(const ir::Graph& graph, const StorageModel& storage, const ir::Node& at) {
  const ir::Node* node = &at;
  return peakLowerBound(buildStepGraph(StepFacts(graph, storage)), indicesOf(graph, {&node, 1})[0]);
}

std::int64_t peakLowerBoundNear(const ir::Graph& graph, const StorageModel& storage,
                                std::span<const ir::Node* const> order, int step, int spineNodes) {
  return peakLowerBoundNear(buildStepGraph(StepFacts(graph, storage)), indicesOf(graph, order), step, spineNodes);
}

}  // namespace gradc::passes
