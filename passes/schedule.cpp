#include "passes/schedule.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <span>
#include <string>
#include <unordered_map>

#include "passes/liveness.h"
#include "passes/adjacency.h"
#include "passes/id_index.h"

namespace gradc::passes {

namespace {

// Results of at most this many bytes (and no workspace) cost nothing worth waiting for.
constexpr std::int64_t kTinyBytes = 64;

// Min-heap of node indices (the input order is the priority).
using IndexHeap = std::priority_queue<int, std::vector<int>, std::greater<int>>;

// The dependence graph and the storage facts a round needs; built once, shared by both rounds.
struct Problem {
  std::vector<const ir::Node*> nodes;  // input order
  Lists dataUsers;   // distinct consumers of each node's results
  Lists orderSuccs;  // in-place update order edges
  std::vector<int> dataPreds, orderPreds;    // distinct predecessor counts
  Lists producers;   // distinct producers (data edges)
  std::vector<char> recompute;
  // Storage groups: one per result value that owns its storage (views join their owner's).
  Lists groupsRead;  // per node: distinct groups among its operands
  Lists groupUsers;  // per group: distinct nodes reading it
  std::vector<std::int64_t> groupBytes;
  std::vector<char> groupPinned;  // graph outputs: never freed
  std::vector<std::int64_t> fresh;  // bytes of fresh (non-view, used) results per node
  std::vector<char> tiny;  // results of at most kTinyBytes, no workspace, no side effects
  std::vector<char> lazy;  // recompute or tiny: satisfies its users' data edges once available
};

Problem buildProblem(const ir::Graph& graph, const StorageModel& storage) {
  Problem p;
  const size_t n = graph.numNodes();
  IdIndex<ir::Node> index(graph.nodeIdBound());  // node -> input index
  for (size_t i = 0; i < n; ++i) {
    p.nodes.push_back(graph.nodes()[i].get());
    index.insert(p.nodes.back(), static_cast<int>(i));
  }
  p.dataPreds.assign(n, 0);
  p.orderPreds.assign(n, 0);
  p.recompute.assign(n, 0);
  p.fresh.assign(n, 0);
  p.tiny.assign(n, 0);
  p.lazy.assign(n, 0);

  IdIndex<ir::Value> groupOf(graph.valueIdBound());  // owner value -> group
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *p.nodes[i];
    p.recompute[i] = node.phase() == ir::Phase::recompute;
    std::int64_t freshBytes = 0;
    bool allFresh = node.numResults() > 0;
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* v = node.result(r);
      if (storage.isView(v)) {
        allFresh = false;
        continue;
      }
      groupOf.insert(v, static_cast<int>(p.groupBytes.size()));
      p.groupBytes.push_back(v->type().bytes());
      p.groupPinned.push_back(0);
      if (v->hasUses()) freshBytes += v->type().bytes();
    }
    p.fresh[i] = freshBytes;
    p.tiny[i] = !p.recompute[i] && !node.op().sideEffects && allFresh && freshBytes <= kTinyBytes &&
                storage.workspaceBytes(&node) == 0;
    p.lazy[i] = p.recompute[i] || p.tiny[i];
  }
  for (const ir::GraphOutput& out : graph.outputs())
    if (int g = groupOf.get(storage.owner(out.value)); g >= 0) p.groupPinned[static_cast<size_t>(g)] = 1;

  // Data edges and storage reads, deduplicated with a per-node stamp. Lists grouped by the
  // reading node fill in order; those grouped by the producer or group are sorted after.
  std::vector<int> stampNode(n, -1), stampGroup(p.groupBytes.size(), -1);
  std::vector<std::pair<int, int>> userPairs, groupReaderPairs;
  p.producers.start.reserve(n + 1);
  p.groupsRead.start.reserve(n + 1);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *p.nodes[i];
    const int self = static_cast<int>(i);
    for (const ir::Value* v : node.operands()) {
      if (const ir::Node* prod = v->producer()) {
        int j = index.get(prod);
        if (stampNode[static_cast<size_t>(j)] != self) {
          stampNode[static_cast<size_t>(j)] = self;
          userPairs.emplace_back(j, self);
          p.producers.items.push_back(j);
          ++p.dataPreds[i];
        }
      }
      const int g = groupOf.get(storage.owner(v));
      if (g < 0) continue;  // a parameter or an input: alive throughout
      auto gi = static_cast<size_t>(g);
      if (stampGroup[gi] == self) continue;
      stampGroup[gi] = self;
      p.groupsRead.items.push_back(g);
      groupReaderPairs.emplace_back(g, self);
    }
    p.producers.endRow();
    p.groupsRead.endRow();
  }
  p.dataUsers = Lists::fromPairs(n, userPairs);
  p.groupUsers = Lists::fromPairs(p.groupBytes.size(), groupReaderPairs);
  std::vector<std::pair<int, int>> orderPairs;  // in-place and collective order edges

  // In-place updates: a side-effect node writes its Param operands. Every other node touching
  // the same storage keeps its side of the writer, as in the input order.
  std::unordered_map<const ir::Value*, std::vector<int>> writers;  // param -> writers; lookups only
  std::vector<const ir::Value*> written;                           // params in first-write order
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *p.nodes[i];
    if (!node.op().sideEffects) continue;
    for (const ir::Value* v : node.operands()) {
      if (v->kind() != ir::ValueKind::Param) continue;
      auto [it, inserted] = writers.try_emplace(v);
      if (inserted) written.push_back(v);
      if (it->second.empty() || it->second.back() != static_cast<int>(i)) it->second.push_back(static_cast<int>(i));
    }
  }
  if (!written.empty()) {
    std::unordered_map<const ir::Value*, std::vector<int>> touching;  // param -> nodes; lookups only
    for (size_t i = 0; i < n; ++i)
      for (const ir::Value* v : p.nodes[i]->operands()) {
        const ir::Value* owner = storage.owner(v);
        if (owner->kind() != ir::ValueKind::Param || !writers.count(owner)) continue;
        std::vector<int>& list = touching[owner];
        if (list.empty() || list.back() != static_cast<int>(i)) list.push_back(static_cast<int>(i));
      }
    // An edge repeated for several params is counted and released once per copy.
    for (const ir::Value* param : written)
      for (int w : writers.at(param))
        for (int u : touching[param]) {
          if (u == w) continue;
          int from = std::min(u, w), to = std::max(u, w);
          orderPairs.emplace_back(from, to);
          ++p.orderPreds[static_cast<size_t>(to)];
        }
  }

  // Collectives: every rank issues them in seq order, so consecutive ones get an order edge
  // (in seq order, which may run against the input order; the data edges never contradict it).
  std::vector<std::pair<std::int64_t, int>> collectives;
  for (size_t i = 0; i < n; ++i)
    if (p.nodes[i]->op().issuesCollective)
      collectives.emplace_back(ir::getInt(p.nodes[i]->attrs(), "seq").value_or(0), static_cast<int>(i));
  std::sort(collectives.begin(), collectives.end());
  for (size_t k = 1; k < collectives.size(); ++k) {
    orderPairs.emplace_back(collectives[k - 1].second, collectives[k].second);
    ++p.orderPreds[static_cast<size_t>(collectives[k].second)];
  }
  // A reduce-scatter's wait frees its bucket, so the eager rule would run it right after its
  // start and leave nothing to overlap with. It waits for the collective issued just before it
  // in the input order (the next bucket's start, passes/shard_state.h) instead.
  int lastIssued = -1;
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *p.nodes[i];
    if (node.op().issuesCollective) lastIssued = static_cast<int>(i);
    if (node.op().collective != ir::Collective::ReduceScatterWait || lastIssued < 0) continue;
    if (p.nodes[static_cast<size_t>(lastIssued)] == node.operand(0)->producer()) continue;
    orderPairs.emplace_back(lastIssued, static_cast<int>(i));
    ++p.orderPreds[i];
  }
  p.orderSuccs = Lists::fromPairs(n, orderPairs);
  return p;
}

// One round of list scheduling; `eager` enables the memory-freeing and tiny-node rules.
std::vector<int> scheduleRound(const Problem& p, bool eager) {
  const size_t n = p.nodes.size();
  std::vector<int> dataPending = p.dataPreds, orderPending = p.orderPreds;
  std::vector<char> scheduled(n, 0), ready(n, 0);
  std::vector<int> remaining(p.groupUsers.size());
  for (size_t g = 0; g < remaining.size(); ++g) remaining[g] = static_cast<int>(p.groupUsers[g].size());
  std::vector<std::int64_t> frees(n, 0);
  IndexHeap readyHeap, eagerHeap, recomputeHeap;
  std::vector<int> order;
  order.reserve(n);

  auto blockedByRecompute = [&](int i) {
    for (int j : p.producers[static_cast<size_t>(i)])
      if (p.recompute[static_cast<size_t>(j)] && !scheduled[static_cast<size_t>(j)]) return true;
    return false;
  };
  auto maybeEager = [&](int i) {
    auto u = static_cast<size_t>(i);
    if (!eager || !ready[u] || scheduled[u]) return;
    if (frees[u] > 0 && p.fresh[u] <= frees[u] && !blockedByRecompute(i)) eagerHeap.push(i);
  };
  // A node whose predecessors are all satisfied. A lazy node (recompute or tiny) becomes
  // available: its users' data edges count as satisfied at once, and it runs right before the
  // first of them (or, if tiny, when its own turn comes). Any other node becomes ready.
  std::vector<int> work;
  auto satisfied = [&](int i) {
    work.push_back(i);
    while (!work.empty()) {
      int x = work.back();
      work.pop_back();
      auto u = static_cast<size_t>(x);
      if (!p.recompute[u]) {
        ready[u] = 1;
        readyHeap.push(x);
        maybeEager(x);
      }
      if (!p.lazy[u]) continue;
      if (p.recompute[u]) recomputeHeap.push(x);
      for (int user : p.dataUsers[u]) {
        auto v = static_cast<size_t>(user);
        if (--dataPending[v] == 0 && orderPending[v] == 0) work.push_back(user);
      }
    }
  };
  auto emit = [&](int i) {
    auto u = static_cast<size_t>(i);
    assert(!scheduled[u]);
    scheduled[u] = 1;
    order.push_back(i);
    for (int g : p.groupsRead[u]) {
      auto gi = static_cast<size_t>(g);
      if (--remaining[gi] != 1 || p.groupPinned[gi]) continue;
      for (int user : p.groupUsers[gi])
        if (!scheduled[static_cast<size_t>(user)]) {
          frees[static_cast<size_t>(user)] += p.groupBytes[gi];
          maybeEager(user);
          break;
        }
    }
    if (!p.lazy[u])
      for (int user : p.dataUsers[u]) {
        auto v = static_cast<size_t>(user);
        if (--dataPending[v] == 0 && orderPending[v] == 0) satisfied(user);
      }
    for (int succ : p.orderSuccs[u]) {
      auto v = static_cast<size_t>(succ);
      if (--orderPending[v] == 0 && dataPending[v] == 0) satisfied(succ);
    }
  };
  // The lazy nodes (recompute or tiny) `i` needs that have not run, in input order, then `i`.
  std::vector<int> closure, stack, closureStamp(n, -1);
  auto emitWithRecompute = [&](int i) {
    closure.clear();
    stack.assign(1, i);
    while (!stack.empty()) {
      int x = stack.back();
      stack.pop_back();
      for (int j : p.producers[static_cast<size_t>(x)]) {
        auto v = static_cast<size_t>(j);
        if (!p.lazy[v] || scheduled[v] || closureStamp[v] == i) continue;
        closureStamp[v] = i;
        closure.push_back(j);
        stack.push_back(j);
      }
    }
    std::sort(closure.begin(), closure.end());
    for (int j : closure) emit(j);
    emit(i);
  };

  for (size_t i = 0; i < n; ++i)
    if (p.dataPreds[i] == 0 && p.orderPreds[i] == 0) satisfied(static_cast<int>(i));
  for (size_t g = 0; g < remaining.size(); ++g)
    if (remaining[g] == 1 && !p.groupPinned[g]) {
      frees[static_cast<size_t>(p.groupUsers[g][0])] += p.groupBytes[g];
      maybeEager(p.groupUsers[g][0]);
    }

  auto popUnscheduled = [&](IndexHeap& heap) {
    while (!heap.empty() && scheduled[static_cast<size_t>(heap.top())]) heap.pop();
    if (heap.empty()) return -1;
    int x = heap.top();
    heap.pop();
    return x;
  };
  while (order.size() < n) {
    int pick = -1;
    while (pick < 0 && !eagerHeap.empty()) {
      pick = popUnscheduled(eagerHeap);
      if (pick >= 0 && blockedByRecompute(pick)) pick = -1;  // its recompute waits for input order
    }
    if (pick < 0) pick = popUnscheduled(readyHeap);
    if (pick >= 0) {
      emitWithRecompute(pick);
      continue;
    }
    // Only recompute nodes that no remaining node reads are left to run (their users are graph
    // outputs, or nothing): run them in input order.
    pick = popUnscheduled(recomputeHeap);
    assert(pick >= 0 && "the dependence graph has a cycle");
    if (pick < 0) break;
    emitWithRecompute(pick);
  }
  return order;
}

// The eager order with every run of recompute nodes (consecutive in the order, right before
// the node they feed) moved up to `distance` places earlier, past nodes it does not depend on
// that are pure (no side effects, no collective): recomputing before an independent node that
// allocates can lower the peak (the run's temporaries are freed before that node's results
// exist). Returns the order unchanged when no run moves.
std::vector<int> hoistRecompute(const Problem& p, const std::vector<int>& order, int distance) {
  std::vector<int> out = order;
  size_t i = 0;
  while (i < out.size()) {
    if (!p.recompute[static_cast<size_t>(out[i])]) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < out.size() && p.recompute[static_cast<size_t>(out[end])]) ++end;
    // Move [i, end) past up to `distance` predecessors.
    for (int step = 0; step < distance && i > 0; ++step) {
      const int before = out[i - 1];
      const ir::Node& node = *p.nodes[static_cast<size_t>(before)];
      if (p.recompute[static_cast<size_t>(before)] || node.op().sideEffects || node.op().issuesCollective) break;
      bool depends = false;
      for (size_t r = i; r < end && !depends; ++r)
        for (int producer : p.producers[static_cast<size_t>(out[r])]) depends = depends || producer == before;
      if (depends) break;
      std::rotate(out.begin() + static_cast<std::ptrdiff_t>(i) - 1, out.begin() + static_cast<std::ptrdiff_t>(i),
                  out.begin() + static_cast<std::ptrdiff_t>(end));
      --i;
      --end;
    }
    i = end + 1;
  }
  return out;
}

}  // namespace

ScheduledLiveness scheduleAndAnalyze(const ir::Graph& graph) { return scheduleAndAnalyze(graph, analyzeStorage(graph)); }

ScheduledLiveness scheduleAndAnalyze(const ir::Graph& graph, const StorageModel& storage, const Liveness* programOrder) {
  Problem problem = buildProblem(graph, storage);
  auto toNodes = [&](const std::vector<int>& order) {
    std::vector<const ir::Node*> nodes;
    nodes.reserve(order.size());
    for (int i : order) nodes.push_back(problem.nodes[static_cast<size_t>(i)]);
    return nodes;
  };
  const std::vector<int> eagerRound = scheduleRound(problem, true);
  ScheduledLiveness eager{toNodes(eagerRound), {}};
  eager.liveness = analyzeLiveness(graph, storage, eager.order);
  // Recompute hoisted one and two places earlier than the eager order's lazy placement.
  // (Two places only when one place helped.)
  for (int distance : {1, 2}) {
    const std::vector<int> hoisted = hoistRecompute(problem, eagerRound, distance);
    if (hoisted == eagerRound) break;
    ScheduledLiveness h{toNodes(hoisted), {}};
    h.liveness = analyzeLiveness(graph, storage, h.order);
    if (h.liveness.peakBytes >= eager.liveness.peakBytes) break;
    eager = std::move(h);
  }
  const std::vector<int> inputRound = scheduleRound(problem, false);
  bool identity = true;
  for (size_t i = 0; i < inputRound.size() && identity; ++i) identity = inputRound[i] == static_cast<int>(i);
  if (identity && programOrder && programOrder->liveBytes.size() == inputRound.size()) {
    if (eager.liveness.peakBytes <= programOrder->peakBytes) return eager;
    return ScheduledLiveness{problem.nodes, *programOrder};
  }
  ScheduledLiveness inputOrder{toNodes(inputRound), {}};
  if (inputOrder.order == eager.order) return eager;
  inputOrder.liveness = analyzeLiveness(graph, storage, inputOrder.order);
  return eager.liveness.peakBytes <= inputOrder.liveness.peakBytes ? std::move(eager) : std::move(inputOrder);
}

std::vector<const ir::Node*> computeSchedule(const ir::Graph& graph) { return scheduleAndAnalyze(graph).order; }

std::int64_t scheduledPeakBytes(const ir::Graph& graph) { return scheduleAndAnalyze(graph).liveness.peakBytes; }

Expected<bool> Schedule::run(ir::Graph& graph) {
  // Every rank issues its collectives in seq order, one per number: a repeated number (a
  // duplicated collective) would desynchronise the ranks.
  std::set<std::int64_t> seqs;
  for (const auto& n : graph.nodes())
    if (n->op().issuesCollective && !seqs.insert(ir::getInt(n->attrs(), "seq").value_or(0)).second)
      return Error{"schedule: two collectives share seq " + std::to_string(*ir::getInt(n->attrs(), "seq")) +
                   " (a collective was duplicated; every rank must issue each one once)"};
  std::vector<const ir::Node*> order = computeSchedule(graph);
  bool changed = false;
  std::vector<ir::Node*> nodes;
  nodes.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    changed |= order[i] != graph.nodes()[i].get();
    nodes.push_back(const_cast<ir::Node*>(order[i]));
  }
  if (changed) graph.reorder(nodes);
  return changed;
}

}  // namespace gradc::passes
