#include "passes/schedule.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <span>
#include <string>

#include "passes/memory/adjacency.h"
#include "passes/memory/liveness.h"
#include "passes/memory/step_graph.h"

namespace gradc::passes {

namespace {

// Results of at most this many bytes (and no workspace) cost nothing worth waiting for.
constexpr std::int64_t kTinyBytes = 64;

// Min-heap of node indices (the input order is the priority).
using IndexHeap = std::priority_queue<int, std::vector<int>, std::greater<int>>;

// What a round needs beyond the step graph; built once, shared by both rounds.
struct Problem {
  const StepGraph& g;
  Lists orderSuccs;                        // in-place update and collective order edges
  std::vector<int> dataPreds, orderPreds;  // distinct predecessor counts
  std::vector<char> recompute;
  std::vector<char> tiny;  // results of at most kTinyBytes, no workspace, no side effects
  std::vector<char> lazy;  // recompute or tiny: satisfies its users' data edges once available

  explicit Problem(const StepGraph& graph) : g(graph) {
    const size_t n = g.size();
    dataPreds.resize(n);
    orderPreds.assign(n, 0);
    recompute.resize(n);
    tiny.resize(n);
    lazy.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int node = static_cast<int>(i);
      dataPreds[i] = static_cast<int>(g.producers[i].size());
      recompute[i] = g.has(node, kStepRecompute);
      tiny[i] = !recompute[i] && !g.has(node, kStepSideEffects) && g.has(node, kStepAllFresh) &&
                g.fresh[i] <= kTinyBytes && g.workspace[i] == 0;
      lazy[i] = recompute[i] || tiny[i];
    }
    for (const auto& [from, to] : g.orderEdges) ++orderPreds[static_cast<size_t>(to)];
    orderSuccs = Lists::fromPairs(n, g.orderEdges);
  }
  size_t size() const { return g.size(); }
};

// One round of list scheduling; `eager` enables the memory-freeing and tiny-node rules.
std::vector<int> scheduleRound(const Problem& p, bool eager) {
  const size_t n = p.size();
  std::vector<int> dataPending = p.dataPreds, orderPending = p.orderPreds;
  std::vector<char> scheduled(n, 0), ready(n, 0);
  std::vector<int> remaining(p.g.groupUsers.size());
  for (size_t g = 0; g < remaining.size(); ++g) remaining[g] = static_cast<int>(p.g.groupUsers[g].size());
  std::vector<std::int64_t> frees(n, 0);
  IndexHeap readyHeap, eagerHeap, recomputeHeap;
  std::vector<int> order;
  order.reserve(n);

  auto blockedByRecompute = [&](int i) {
    for (int j : p.g.producers[static_cast<size_t>(i)])
      if (p.recompute[static_cast<size_t>(j)] && !scheduled[static_cast<size_t>(j)]) return true;
    return false;
  };
  auto maybeEager = [&](int i) {
    auto u = static_cast<size_t>(i);
    if (!eager || !ready[u] || scheduled[u]) return;
    if (frees[u] > 0 && p.g.fresh[u] <= frees[u] && !blockedByRecompute(i)) eagerHeap.push(i);
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
      for (int user : p.g.users[u]) {
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
    for (int g : p.g.groupsRead[u]) {
      auto gi = static_cast<size_t>(g);
      if (--remaining[gi] != 1 || p.g.groupPinned[gi]) continue;
      for (int user : p.g.groupUsers[gi])
        if (!scheduled[static_cast<size_t>(user)]) {
          frees[static_cast<size_t>(user)] += p.g.groupBytes[gi];
          maybeEager(user);
          break;
        }
    }
    if (!p.lazy[u])
      for (int user : p.g.users[u]) {
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
      for (int j : p.g.producers[static_cast<size_t>(x)]) {
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
    if (remaining[g] == 1 && !p.g.groupPinned[g]) {
      frees[static_cast<size_t>(p.g.groupUsers[g][0])] += p.g.groupBytes[g];
      maybeEager(p.g.groupUsers[g][0]);
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
      if (p.recompute[static_cast<size_t>(before)] || p.g.has(before, kStepSideEffects) ||
          p.g.has(before, kStepIssuesCollective))
        break;
      bool depends = false;
      for (size_t r = i; r < end && !depends; ++r)
        for (int producer : p.g.producers[static_cast<size_t>(out[r])]) depends = depends || producer == before;
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

std::vector<int> scheduleOrder(const StepGraph& graph, StepPeak* peak) {
  const Problem problem(graph);
  const std::vector<int> eager = scheduleRound(problem, true);
  std::vector<int> best = eager;
  StepPeak bestPeak = stepPeak(graph, best);
  // Recompute hoisted one and two places earlier than the eager order's lazy placement.
  // (Two places only when one place helped.)
  for (int distance : {1, 2}) {
    std::vector<int> hoisted = hoistRecompute(problem, eager, distance);
    if (hoisted == eager) break;
    const StepPeak h = stepPeak(graph, hoisted);
    if (h.bytes >= bestPeak.bytes) break;
    best = std::move(hoisted);
    bestPeak = h;
  }
  std::vector<int> input = scheduleRound(problem, false);
  if (input != best) {
    const StepPeak in = stepPeak(graph, input);
    if (in.bytes < bestPeak.bytes) {
      best = std::move(input);
      bestPeak = in;
    }
  }
  if (peak) *peak = bestPeak;
  return best;
}

StepPeak scheduledPeak(const StepGraph& graph) {
  StepPeak peak;
  scheduleOrder(graph, &peak);
  return peak;
}

ScheduledLiveness scheduleAndAnalyze(const ir::Graph& graph) { return scheduleAndAnalyze(graph, analyzeStorage(graph)); }

ScheduledLiveness scheduleAndAnalyze(const ir::Graph& graph, const StorageModel& storage) {
  const StepGraph step = buildStepGraph(StepFacts(graph, storage));
  const std::vector<int> order = scheduleOrder(step);
  ScheduledLiveness out;
  out.order.reserve(order.size());
  for (int i : order) out.order.push_back(step.nodes[static_cast<size_t>(i)]);
  out.liveness = analyzeLiveness(graph, storage, step, order);
  return out;
}

std::vector<const ir::Node*> computeSchedule(const ir::Graph& graph) { return scheduleAndAnalyze(graph).order; }

std::int64_t scheduledPeakBytes(const ir::Graph& graph) {
  return scheduledPeak(buildStepGraph(StepFacts(graph, analyzeStorage(graph)))).bytes;
}

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
