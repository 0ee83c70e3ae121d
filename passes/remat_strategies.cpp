#include "passes/remat_strategies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <span>

#include "passes/budget.h"

namespace gradc::passes {

// ---- strategy names ------------------------------------------------------------------------------

std::string_view rematStrategyName(RematStrategy strategy) {
  switch (strategy) {
    case RematStrategy::None: return "none";
    case RematStrategy::Sqrt: return "sqrt";
    case RematStrategy::Chain: return "chain";
    case RematStrategy::MemoryPoor: return "memory-poor";
    case RematStrategy::Selective: return "selective";
    case RematStrategy::Auto: return "auto";
  }
  return "?";
}

std::vector<RematStrategy> concreteRematStrategies() {
  return {RematStrategy::None, RematStrategy::Sqrt, RematStrategy::Chain, RematStrategy::MemoryPoor,
          RematStrategy::Selective};
}

Expected<RematStrategy> parseRematStrategy(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (RematStrategy s : {RematStrategy::None, RematStrategy::Sqrt, RematStrategy::Chain, RematStrategy::MemoryPoor,
                          RematStrategy::Selective, RematStrategy::Auto})
    if (rematStrategyName(s) == lower) return s;
  return Error{"unknown remat strategy '" + std::string(name) +
               "'; expected one of: none, sqrt, chain, memory-poor, selective, auto"};
}

namespace remat {

namespace {

using NodeSet = std::unordered_set<const ir::Node*>;
using ValueSet = std::unordered_set<const ir::Value*>;

bool isForward(const ir::Node& n) { return n.phase() == ir::Phase::fwd; }

// ---- chain detection -----------------------------------------------------------------------------

struct ChainCuts {
  int prefixEnd = -1;  // last prefix position (-1: no prefix)
  int tailBegin = 0;   // first tail position (== F: no tail)
  std::vector<int> cuts;  // a cut at p: a stage ends after position p
  int score() const { return static_cast<int>(cuts.size()) + 1; }
};

// lastUse[p]: the last forward position < tailBegin reading a result of node p (-1 if none).
std::vector<int> lastUses(const std::vector<const ir::Node*>& fwd,
                          const std::unordered_map<const ir::Node*, int>& localPos, int tailBegin) {
  std::vector<int> last(fwd.size(), -1);
  for (size_t p = 0; p < fwd.size(); ++p)
    for (size_t r = 0; r < fwd[p]->numResults(); ++r)
      for (const ir::Use& u : fwd[p]->result(r)->uses()) {
        auto it = localPos.find(u.user);
        if (it == localPos.end() || it->second >= tailBegin) continue;
        last[p] = std::max(last[p], it->second);
      }
  return last;
}

std::vector<int> greedyCuts(const std::vector<int>& last, int prefixEnd, int tailBegin) {
  std::vector<int> cuts;
  int oldMax = -1;  // last use of any value produced before the current stage
  int curMax = -1;  // last use of any value produced in the current stage
  for (int p = prefixEnd + 1; p + 1 < tailBegin; ++p) {
    curMax = std::max(curMax, last[static_cast<size_t>(p)]);
    if (oldMax <= p) {
      cuts.push_back(p);
      oldMax = std::max(oldMax, curMax);
      curMax = -1;
    }
  }
  return cuts;
}

ChainCuts findChain(const std::vector<const ir::Node*>& fwd, const std::unordered_map<const ir::Node*, int>& localPos) {
  const int F = static_cast<int>(fwd.size());
  ChainCuts best;
  best.tailBegin = F;
  bool have = false;
  for (int tail = F; tail >= std::max(1, F - 8); --tail) {
    std::vector<int> last = lastUses(fwd, localPos, tail);
    std::vector<int> firstCuts = greedyCuts(last, -1, tail);
    std::vector<int> prefixes = {-1};
    for (size_t i = 0; i < firstCuts.size() && i < 8; ++i) prefixes.push_back(firstCuts[i]);
    for (int prefix : prefixes) {
      if (prefix + 1 >= tail) continue;
      ChainCuts c;
      c.prefixEnd = prefix;
      c.tailBegin = tail;
      c.cuts = greedyCuts(last, prefix, tail);
      const int score = c.score() + (tail < F ? 1 : 0);
      const int bestScore = best.score() + (best.tailBegin < F ? 1 : 0);
      // More stages win; ties keep the earlier choice (larger tail start, smaller prefix).
      if (!have || score > bestScore) {
        best = std::move(c);
        have = true;
      }
    }
  }
  if (!have) {
    best.prefixEnd = -1;
    best.tailBegin = F;
  }
  return best;
}

// Nodes of `nodes` (program order) needed to compute `targets`, in program order.
std::vector<const ir::Node*> closure(const std::vector<const ir::Node*>& nodes, const std::vector<const ir::Value*>& targets) {
  ValueSet needed(targets.begin(), targets.end());
  std::vector<const ir::Node*> out;
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ir::Node* n = *it;
    bool need = false;
    for (size_t r = 0; r < n->numResults() && !need; ++r) need = needed.count(n->result(r)) > 0;
    if (!need) continue;
    out.push_back(n);
    for (const ir::Value* v : n->operands()) needed.insert(v);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

// The value that owns v's storage: v, or the source of the views v was taken through.
const ir::Value* storage(const ir::Value* v) {
  while (v->producer() && v->producer()->op().view && v->producer()->numOperands() > 0) v = v->producer()->operand(0);
  return v;
}

bool cheap(const ir::Node& n, std::int64_t flops) {
  if (n.op().sideEffects) return false;
  std::int64_t elements = 0;
  for (size_t r = 0; r < n.numResults(); ++r) elements += n.result(r)->type().numel();
  return flops <= kCheapFlopsPerElement * std::max<std::int64_t>(elements, 1);
}

}  // namespace

// ---- analysis ------------------------------------------------------------------------------------

Expected<Analysis> analyze(ir::Graph& graph) {
  Analysis a;
  const auto nodes = graph.nodes();
  a.numNodes = nodes.size();
  for (const auto& n : nodes)
    if (n->phase() == ir::Phase::recompute)
      return Error{"remat: the graph already has recompute nodes (remat runs once, on a graph without them)"};

  // Kept whatever the plan: graph outputs, and the results of side-effect nodes (collectives:
  // recomputing one would issue it twice on this rank only, and the ranks would disagree).
  ValueSet pinned;
  for (const ir::GraphOutput& out : graph.outputs()) pinned.insert(out.value);
  for (const auto& n : nodes)
    if (n->op().sideEffects)
      for (size_t r = 0; r < n->numResults(); ++r) pinned.insert(n->result(r));
  std::unordered_map<const ir::Node*, size_t> position;
  position.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) position.emplace(nodes[i].get(), i);

  // Episodes: a run of forward nodes and the non-forward nodes up to the next run.
  for (size_t i = 0; i < nodes.size();) {
    if (!isForward(*nodes[i])) {
      ++i;
      continue;
    }
    Episode ep;
    ep.forwardBegin = i;
    while (i < nodes.size() && isForward(*nodes[i])) ++i;
    ep.forwardEnd = i;
    while (i < nodes.size() && !isForward(*nodes[i])) ++i;
    ep.end = i;
    a.episodes.push_back(std::move(ep));
  }

  for (size_t e = 0; e < a.episodes.size(); ++e) {
    Episode& ep = a.episodes[e];
    std::vector<const ir::Node*> fwd;
    std::unordered_map<const ir::Node*, int> localPos;
    for (size_t p = ep.forwardBegin; p < ep.forwardEnd; ++p) {
      localPos.emplace(nodes[p].get(), static_cast<int>(fwd.size()));
      fwd.push_back(nodes[p].get());
      const std::int64_t f = nodes[p]->flops();
      a.flops.emplace(nodes[p].get(), f);
      a.forwardFlops += f;
    }
    const int F = static_cast<int>(fwd.size());
    ChainCuts cuts = findChain(fwd, localPos);
    ep.prefixNodes = cuts.prefixEnd + 1;
    ep.tailNodes = F - cuts.tailBegin;

    // Raw stages: (prefixEnd, c1], (c1, c2], ..., (c_last, tailBegin - 1], then the tail.
    std::vector<std::pair<int, int>> ranges;  // [begin, end)
    int begin = cuts.prefixEnd + 1;
    for (int c : cuts.cuts) {
      ranges.push_back({begin, c + 1});
      begin = c + 1;
    }
    if (begin < cuts.tailBegin) ranges.push_back({begin, cuts.tailBegin});
    if (cuts.tailBegin < F) ranges.push_back({cuts.tailBegin, F});
    ep.rawStages = static_cast<int>(ranges.size());
    if (ranges.empty()) continue;

    // Stage contents for a partition into ranges: nodes, boundary (read by the next range),
    // stored (read by a backward node, or boundary), the model's costs and sizes.
    std::vector<int> stageOfPos(static_cast<size_t>(F), -1);
    auto describe = [&](const std::vector<std::pair<int, int>>& parts, std::vector<GraphStage>& stages,
                        std::vector<chain::Stage>& model) {
      for (size_t s = 0; s < parts.size(); ++s)
        for (int p = parts[s].first; p < parts[s].second; ++p) stageOfPos[static_cast<size_t>(p)] = static_cast<int>(s);
      stages.assign(parts.size(), {});
      model.assign(parts.size(), {});
      for (size_t s = 0; s < parts.size(); ++s) {
        GraphStage& st = stages[s];
        chain::Stage& m = model[s];
        for (int p = parts[s].first; p < parts[s].second; ++p) {
          const ir::Node* n = fwd[static_cast<size_t>(p)];
          st.nodes.push_back(n);
          m.forwardCost += a.flops.at(n);
          for (size_t r = 0; r < n->numResults(); ++r) {
            const ir::Value* v = n->result(r);
            if (pinned.count(v)) continue;
            bool readByNext = false, readByBackward = false;
            for (const ir::Use& u : v->uses()) {
              if (!isForward(*u.user)) {
                readByBackward = true;
                continue;
              }
              auto it = localPos.find(u.user);
              if (it != localPos.end() && stageOfPos[static_cast<size_t>(it->second)] == static_cast<int>(s) + 1)
                readByNext = true;
            }
            if (readByNext) st.boundary.push_back(v);
            if (readByNext || readByBackward) st.stored.push_back(v);
          }
        }
        // Bytes by buffer: views share their source's storage (OpInfo::view), which counts
        // once, in the stage that allocates it.
        auto bytes = [&](const std::vector<const ir::Value*>& values) {
          ValueSet counted;
          std::int64_t total = 0;
          for (const ir::Value* v : values) {
            const ir::Value* root = storage(v);
            if (root->kind() != ir::ValueKind::Result) continue;
            auto it = localPos.find(root->producer());
            if (it == localPos.end() || stageOfPos[static_cast<size_t>(it->second)] != static_cast<int>(s)) continue;
            if (counted.insert(root).second) total += root->type().bytes();
          }
          return total;
        };
        m.boundaryBytes = bytes(st.boundary);
        m.storedBytes = bytes(st.stored);
      }
    };

    std::vector<GraphStage> raw;
    std::vector<chain::Stage> rawModel;
    describe(ranges, raw, rawModel);

    // A stage the backward reads nothing from (an MLP layer's linear before its relu) only
    // feeds the next one: it joins it, so that "storing" it costs what it really keeps.
    {
      auto readByBackward = [&](const GraphStage& st) {
        for (const ir::Value* v : st.stored)
          for (const ir::Use& u : v->uses())
            if (!isForward(*u.user)) return true;
        return false;
      };
      std::vector<std::pair<int, int>> merged;
      bool open = false;
      for (size_t i = 0; i < ranges.size(); ++i) {
        if (open)
          merged.back().second = ranges[i].second;
        else
          merged.push_back(ranges[i]);
        open = !readByBackward(raw[i]) && i + 1 < ranges.size();
      }
      if (merged.size() != ranges.size()) {
        ranges = std::move(merged);
        describe(ranges, raw, rawModel);
      }
    }
    ep.rawStages = static_cast<int>(ranges.size());

    // Selective: drop cheap stored values that are not boundaries of the fine chain.
    for (const GraphStage& st : raw) {
      ValueSet boundary(st.boundary.begin(), st.boundary.end());
      for (const ir::Value* v : st.stored)
        if (!boundary.count(v) && cheap(*v->producer(), a.flops.at(v->producer()))) ep.selectiveDrop.insert(v);
    }

    // Group long chains for the solver; the groups are described afresh (a boundary inside a
    // group is not stored unless the backward reads it).
    std::vector<int> ends = chain::groupStages(rawModel, kMaxSolverStages);
    std::vector<std::pair<int, int>> groups;
    int first = 0;
    for (int end : ends) {
      groups.push_back({ranges[static_cast<size_t>(first)].first, ranges[static_cast<size_t>(end) - 1].second});
      first = end;
    }
    describe(groups, ep.stages, ep.model);
    for (GraphStage& g : ep.stages) {
      g.boundaryNodes = closure(g.nodes, g.boundary);
      g.storedNodes = closure(g.nodes, g.stored);
    }
    // External buffers: the storage (through views) of prefix values that stage nodes read,
    // unless a backward node reads that storage anyway.
    {
      NodeSet prefix;
      for (int p = 0; p < ep.prefixNodes; ++p) prefix.insert(fwd[static_cast<size_t>(p)]);
      std::unordered_map<const ir::Value*, int> roots;  // buffer -> the last (grouped) stage reading it
      for (size_t g = 0; g < ep.stages.size(); ++g)
        for (const ir::Node* n : ep.stages[g].nodes)
          for (const ir::Value* u : n->operands()) {
            if (!u->producer() || !prefix.count(u->producer())) continue;
            const ir::Value* root = storage(u);
            if (root->kind() == ir::ValueKind::Result) roots[root] = static_cast<int>(g);
          }
      std::vector<std::pair<const ir::Value*, int>> ordered(roots.begin(), roots.end());
      for (const auto& [root, lastReader] : ordered) {
        // Every alias of the buffer: view results reachable from the root.
        bool readByBackward = false;
        std::vector<const ir::Value*> work = {root};
        while (!work.empty() && !readByBackward) {
          const ir::Value* v = work.back();
          work.pop_back();
          for (const ir::Use& u : v->uses()) {
            if (!isForward(*u.user)) readByBackward = true;
            else if (u.user->op().view && u.operandIndex == 0)
              for (size_t r = 0; r < u.user->numResults(); ++r) work.push_back(u.user->result(r));
          }
        }
        if (readByBackward) continue;
        ep.external.bytes += root->type().bytes();
        ep.external.lastReader = std::max(ep.external.lastReader, lastReader);
      }
    }

    for (size_t s = 0; s < ep.stages.size(); ++s)
      for (const ir::Node* n : ep.stages[s].nodes)
        for (size_t r = 0; r < n->numResults(); ++r)
          if (!pinned.count(n->result(r)))
            a.values.emplace(n->result(r),
                             ValueInfo{static_cast<int>(e), static_cast<int>(s), static_cast<int>(a.values.size())});

    // Backward uses of stage values, labelled with their stage.
    ValueSet boundaries;
    for (const GraphStage& st : ep.stages) boundaries.insert(st.boundary.begin(), st.boundary.end());
    const int lastStage = static_cast<int>(ep.stages.size()) - 1;
    int current = lastStage;
    for (size_t p = ep.forwardEnd; p < ep.end; ++p) {
      ir::Node* n = nodes[p].get();
      BackwardUse use{n, p, -1, {}};
      int lo = 0, hi = lastStage, latest = -1;  // the stages the operands allow
      for (unsigned i = 0; i < n->numOperands(); ++i) {
        auto it = a.values.find(n->operand(i));
        if (it == a.values.end() || it->second.episode != static_cast<int>(e)) continue;
        const int s = it->second.stage;
        use.operands.push_back(i);
        latest = std::max(latest, s);
        lo = std::max(lo, s);
        hi = std::min(hi, boundaries.count(n->operand(i)) ? s + 1 : s);
      }
      if (use.operands.empty()) continue;
      use.label = lo <= hi && lo <= current ? std::min(hi, current) : latest;
      current = std::min(current, use.label);
      ep.uses.push_back(std::move(use));
    }

    // Gradient bytes per stage: results of the nodes of a stage's backward window that
    // outlive the next stage's window (parameter gradients waiting for the optimizer,
    // accumulated input gradients). Backward bytes: the largest short-lived result plus
    // kernel workspace of one node of the window.
    if (!ep.uses.empty()) {
      const size_t bwdEnd = ep.uses.back().position + 1;
      std::vector<size_t> windowEnd(ep.stages.size(), bwdEnd);  // first position of a lower label
      for (const BackwardUse& use : ep.uses)
        for (int t = use.label + 1; t <= lastStage && windowEnd[static_cast<size_t>(t)] == bwdEnd; ++t)
          windowEnd[static_cast<size_t>(t)] = use.position;
      size_t next = 0;
      int window = lastStage;
      ValueSet survivors;  // storage counted in gradientBytes (views count their source's, once)
      for (size_t p = ep.forwardEnd; p < bwdEnd; ++p) {
        if (next < ep.uses.size() && ep.uses[next].position == p) window = ep.uses[next++].label;
        if (window < 0) continue;
        const size_t limit = window >= 1 ? windowEnd[static_cast<size_t>(window) - 1] : bwdEnd;
        const ir::Node* n = nodes[p].get();
        chain::Stage& st = ep.model[static_cast<size_t>(window)];
        std::int64_t temporary = n->workspaceBytes();
        for (size_t r = 0; r < n->numResults(); ++r) {
          const ir::Value* v = n->result(r);
          bool survives = v->isGraphOutput();
          for (const ir::Use& u : v->uses())
            if (!survives) survives = position.at(u.user) >= limit;
          const ir::Value* root = storage(v);
          if (survives) {
            if (survivors.insert(root).second) st.gradientBytes += root->type().bytes();
          } else if (root == v) {
            temporary += v->type().bytes();
          }
        }
        st.backwardBytes = std::max(st.backwardBytes, temporary);
      }
    }
  }
  return a;
}

// ---- candidates ----------------------------------------------------------------------------------

namespace {

Candidate uniform(const Analysis& a, RematStrategy strategy, std::string description, EpisodePlan::Kind kind) {
  Candidate c{strategy, std::move(description), {}};
  for (size_t e = 0; e < a.episodes.size(); ++e) c.episodes.push_back(EpisodePlan{kind, {}});
  return c;
}

template <class MakeSchedule>
Candidate scheduled(const Analysis& a, RematStrategy strategy, std::string description, int minStages, MakeSchedule make) {
  Candidate c{strategy, std::move(description), {}};
  for (const Episode& ep : a.episodes) {
    if (static_cast<int>(ep.model.size()) < minStages)
      c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Keep, {}});
    else
      c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Schedule, make(ep)});
  }
  return c;
}

// Frontier levels thinned to at most about kMaxChainCandidates, spread evenly in memory and
// at least 1% of the whole frontier's top apart (a plan saving less than that over its
// neighbour is not worth measuring). Always keeps the lowest and the highest level.
std::vector<int> thinned(const std::vector<int>& frontier) {
  if (frontier.size() <= 2) return frontier;
  const int lo = frontier.front(), hi = frontier.back();
  const int gap = std::max({1, (hi - lo) / (kMaxChainCandidates - 1), hi / 100});
  std::vector<int> out = {lo};
  for (size_t i = 1; i + 1 < frontier.size(); ++i)
    if (frontier[i] >= out.back() + gap && frontier[i] + gap <= hi) out.push_back(frontier[i]);
  out.push_back(hi);
  return out;
}

void chainCandidates(const Analysis& a, bool skipNoRecompute, std::vector<Candidate>& out) {
  // One solver per distinct chain (micro-batches repeat the same one).
  std::vector<std::pair<const std::vector<chain::Stage>*, chain::Solver>> solvers;
  std::vector<size_t> solverOf;
  for (const Episode& ep : a.episodes) {
    size_t found = solvers.size();
    for (size_t i = 0; i < solvers.size(); ++i)
      if (*solvers[i].first == ep.model && solvers[i].second.external().bytes == ep.external.bytes &&
          solvers[i].second.external().lastReader == ep.external.lastReader)
        found = i;
    if (found == solvers.size()) solvers.push_back({&ep.model, chain::solveChain(ep.model, kSolverLevels, ep.external)});
    solverOf.push_back(found);
  }
  if (a.episodes.empty()) return;
  std::vector<std::vector<int>> levels;
  for (auto& [model, solver] : solvers) levels.push_back(thinned(solver.frontier()));
  const size_t count = levels[solverOf[0]].size();
  for (size_t j = 0; j < count; ++j) {
    Candidate c{RematStrategy::Chain, {}, {}};
    bool recompute = false;
    for (size_t e = 0; e < a.episodes.size(); ++e) {
      const chain::Solver& solver = solvers[solverOf[e]].second;
      const std::vector<int>& mine = levels[solverOf[e]];
      if (mine.empty() || a.episodes[e].model.size() < 2) {
        c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Keep, {}});
        continue;
      }
      const size_t k = count <= 1 ? mine.size() - 1 : j * (mine.size() - 1) / (count - 1);
      const int level = mine[k];
      if (*solver.cost(level) > chain::totalForwardCost(a.episodes[e].model)) recompute = true;
      c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Schedule, solver.schedule(level)});
      if (e == 0)
        c.description = *solver.cost(level) == chain::totalForwardCost(a.episodes[e].model)
                            ? "chain: store every stage (no recompute)"
                            : "chain: the optimal schedule of " + std::to_string(a.episodes[e].model.size()) +
                                  " stages within " + formatBytes(static_cast<std::int64_t>(level) * solver.unitBytes()) +
                                  " of modelled activations (level " + std::to_string(level) + ")";
    }
    if (skipNoRecompute && !recompute) continue;
    out.push_back(std::move(c));
  }
}

}  // namespace

std::vector<Candidate> candidates(const Analysis& a, RematStrategy strategy) {
  std::vector<Candidate> out;
  const bool all = strategy == RematStrategy::Auto;
  auto sqrtPlan = [&](RematStrategy label) {
    int raw = a.episodes.empty() ? 0 : a.episodes[0].rawStages;
    int segments = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(std::max(raw, 1))))));
    return scheduled(a, label, "sqrt: " + std::to_string(segments) + " segments, one extra forward", 3,
                     [&](const Episode& ep) {
                       int seg = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(std::max(ep.rawStages, 1))))));
                       return chain::sqrtSchedule(ep.model, seg);
                     });
  };
  auto poorPlan = [&](RematStrategy label) {
    return scheduled(a, label, "memory-poor: keep only the chain input", 2,
                     [](const Episode& ep) { return chain::memoryPoorSchedule(ep.model, kMemoryPoorSegments); });
  };
  if (strategy == RematStrategy::None || all)
    out.push_back(uniform(a, RematStrategy::None, "none: keep every activation", EpisodePlan::Kind::Keep));
  if (strategy == RematStrategy::Selective || all)
    out.push_back(uniform(a, RematStrategy::Selective,
                          "selective: keep matmul/linear outputs and stage boundaries, recompute cheap ops",
                          EpisodePlan::Kind::Selective));
  if (strategy == RematStrategy::Sqrt || all) out.push_back(sqrtPlan(RematStrategy::Sqrt));
  if (strategy == RematStrategy::Chain || all) chainCandidates(a, all, out);
  if (strategy == RematStrategy::Chain) {
    // The solver is exact for the chain model, which only approximates the graph's liveness;
    // the classic schedules of the same chain are measured beside its frontier, so chain is
    // never worse than sqrt or memory-poor at any budget.
    out.push_back(sqrtPlan(RematStrategy::Chain));
    out.push_back(poorPlan(RematStrategy::Chain));
  }
  if (strategy == RematStrategy::MemoryPoor || all) out.push_back(poorPlan(RematStrategy::MemoryPoor));
  return out;
}

// ---- the rewrite planner -------------------------------------------------------------------------

namespace {

// Copies of droppable values, by dense value id: which copy backward readers get now.
class CopyTable {
 public:
  void resize(size_t n) {
    source_.assign(n, Source{});
    held_.assign(n, 0);
  }
  const Source* find(int id) const { return held_[static_cast<size_t>(id)] ? &source_[static_cast<size_t>(id)] : nullptr; }
  void set(int id, Source s) {
    source_[static_cast<size_t>(id)] = s;
    held_[static_cast<size_t>(id)] = 1;
  }
  void erase(int id) { held_[static_cast<size_t>(id)] = 0; }

 private:
  std::vector<Source> source_;
  std::vector<std::uint8_t> held_;
};

class Planner {
 public:
  Planner(const Analysis& a, RewritePlan& plan) : a_(a), plan_(plan) {
    full_.resize(a.values.size());
    bound_.resize(a.values.size());
    cache_.resize(a.values.size());
    local_.resize(a.values.size());
    localStamp_.assign(a.values.size(), 0);
  }

  void run(int episode, const EpisodePlan& p) {
    const Episode& ep = a_.episodes[static_cast<size_t>(episode)];
    if (p.kind == EpisodePlan::Kind::Keep || ep.uses.empty()) return;
    episode_ = episode;
    ep_ = &ep;
    selective_ = p.kind == EpisodePlan::Kind::Selective;
    transient_.assign(ep.stages.size(), false);
    clearCache();
    ops_ = selective_ ? nullptr : &p.schedule;
    op_ = 0;
    if (ops_) firstPass();
    for (const BackwardUse& use : ep.uses) {
      before_ = use.position;
      if (ops_) advance(use.label);
      for (unsigned i : use.operands) {
        const ir::Value* v = use.node->operand(i);
        Source s = resolve(v);
        if (s.clone >= 0 || s.value != v) plan_.rewires.push_back(Rewire{use.node, i, s});
      }
    }
    // Leave the tables empty for the next episode.
    for (size_t s = 0; s < ep.stages.size(); ++s) {
      clearFull(static_cast<int>(s));
      clearBound(static_cast<int>(s));
    }
    clearCache();
  }

 private:
  int idOf(const ir::Value* v) const { return a_.values.at(v).id; }

  void clearFull(int stage) {
    for (const ir::Value* v : ep_->stages[static_cast<size_t>(stage)].stored)
      if (auto it = a_.values.find(v); it != a_.values.end()) full_.erase(it->second.id);
  }
  void clearBound(int stage) {
    for (const ir::Value* v : ep_->stages[static_cast<size_t>(stage)].boundary)
      if (auto it = a_.values.find(v); it != a_.values.end()) bound_.erase(it->second.id);
    transient_[static_cast<size_t>(stage)] = false;
  }
  void clearCache() {
    for (int id : cached_) cache_.erase(id);
    cached_.clear();
  }

  // The first pass is the original forward: record which originals the schedule keeps.
  void firstPass() {
    const chain::Schedule& ops = *ops_;
    for (; op_ < ops.size() && ops[op_].kind != chain::OpKind::Backward; ++op_) {
      const chain::Op& op = ops[op_];
      const GraphStage& st = ep_->stages[static_cast<size_t>(op.stage)];
      if (op.kind == chain::OpKind::ForwardAll) {
        for (const ir::Value* v : st.stored)
          if (auto it = a_.values.find(v); it != a_.values.end()) full_.set(it->second.id, Source{v});
      } else {
        clearBound(op.stage);
        for (const ir::Value* v : st.boundary)
          if (auto it = a_.values.find(v); it != a_.values.end()) bound_.set(it->second.id, Source{v});
        transient_[static_cast<size_t>(op.stage)] = op.kind == chain::OpKind::ForwardTransient;
      }
      consumeTransientInput(op.stage);
    }
  }

  void consumeTransientInput(int stage) {
    if (stage > 0 && transient_[static_cast<size_t>(stage) - 1]) clearBound(stage - 1);
  }

  // Runs the schedule up to (not including) Backward(t).
  void advance(int t) {
    const chain::Schedule& ops = *ops_;
    for (; op_ < ops.size(); ++op_) {
      const chain::Op& op = ops[op_];
      if (op.kind == chain::OpKind::Backward) {
        if (op.stage <= t) return;  // at Backward(t), or t is already back-propagated
        // Backward(op.stage) is over: its copies die.
        clearFull(op.stage);
        if (op.stage > 0) clearBound(op.stage - 1);
        clearCache();
        continue;
      }
      forward(op);
    }
  }

  void forward(const chain::Op& op) {
    const auto i = static_cast<size_t>(op.stage);
    const GraphStage& st = ep_->stages[i];
    const bool all = op.kind == chain::OpKind::ForwardAll;
    ++stamp_;  // this forward's own results: local_[id] where localStamp_[id] == stamp_
    for (const ir::Node* n : all ? st.storedNodes : st.boundaryNodes) {
      const auto first = static_cast<std::uint32_t>(plan_.operands.size());
      for (const ir::Value* u : n->operands()) {
        auto it = a_.values.find(u);
        if (it != a_.values.end() && localStamp_[static_cast<size_t>(it->second.id)] == stamp_)
          plan_.operands.push_back(local_[static_cast<size_t>(it->second.id)]);
        else
          plan_.operands.push_back(resolve(u));
      }
      const int id = emit(n, first);
      for (unsigned r = 0; r < n->numResults(); ++r)
        if (auto it = a_.values.find(n->result(r)); it != a_.values.end()) {
          local_[static_cast<size_t>(it->second.id)] = Source{nullptr, id, r};
          localStamp_[static_cast<size_t>(it->second.id)] = stamp_;
        }
    }
    auto localOf = [&](const ir::Value* v) -> const Source* {
      auto it = a_.values.find(v);
      if (it == a_.values.end() || localStamp_[static_cast<size_t>(it->second.id)] != stamp_) return nullptr;
      return &local_[static_cast<size_t>(it->second.id)];
    };
    if (all) {
      clearFull(op.stage);
      for (const ir::Value* v : st.stored)
        if (const Source* s = localOf(v)) full_.set(idOf(v), *s);
    } else {
      clearBound(op.stage);
      for (const ir::Value* v : st.boundary)
        if (const Source* s = localOf(v)) bound_.set(idOf(v), *s);
      transient_[i] = op.kind == chain::OpKind::ForwardTransient;
    }
    consumeTransientInput(op.stage);
  }

  // A clone of `of` whose operands were just appended to plan_.operands from `first`.
  int emit(const ir::Node* of, std::uint32_t first) {
    plan_.clones.push_back(CloneOp{of, before_, first});
    return static_cast<int>(plan_.clones.size()) - 1;
  }

  // The copy of v that readers should use now, or nullopt when v must be recomputed.
  std::optional<Source> lookup(const ir::Value* v) const {
    auto info = a_.values.find(v);
    if (info == a_.values.end() || info->second.episode != episode_) return Source{v};
    const int id = info->second.id;
    if (selective_ && !ep_->selectiveDrop.count(v)) return Source{v};
    if (!selective_) {
      // The schedule's copies first: a full forward replaces older on-demand ones.
      if (const Source* s = full_.find(id)) return *s;
      if (const Source* s = bound_.find(id)) return *s;
    }
    if (const Source* s = cache_.find(id)) return *s;
    return std::nullopt;
  }

  // Whether an on-demand clone of n exists (all its results are cached together).
  bool cloned(const ir::Node& n) const {
    for (size_t r = 0; r < n.numResults(); ++r)
      if (auto it = a_.values.find(n.result(r)); it != a_.values.end()) return cache_.find(it->second.id) != nullptr;
    return false;
  }

  // lookup(), recomputing v (and what it needs) on demand; iterative, so long chains of
  // dropped values cannot exhaust the stack.
  Source resolve(const ir::Value* v) {
    if (std::optional<Source> s = lookup(v)) return *s;
    std::vector<const ir::Node*> work = {v->producer()};
    while (!work.empty()) {
      const ir::Node* n = work.back();
      if (cloned(*n)) {  // meanwhile, as a producer of another missing value
        work.pop_back();
        continue;
      }
      const ir::Value* missing = nullptr;
      for (const ir::Value* u : n->operands())
        if (!lookup(u)) {
          missing = u;
          break;
        }
      if (missing) {
        work.push_back(missing->producer());
        continue;
      }
      const auto first = static_cast<std::uint32_t>(plan_.operands.size());
      for (const ir::Value* u : n->operands()) plan_.operands.push_back(*lookup(u));
      const int id = emit(n, first);
      if (!selective_) ++plan_.onDemandClones;
      for (unsigned r = 0; r < n->numResults(); ++r)
        if (auto it = a_.values.find(n->result(r)); it != a_.values.end()) {
          cache_.set(it->second.id, Source{nullptr, id, r});
          cached_.push_back(it->second.id);
        }
      work.pop_back();
    }
    return *lookup(v);
  }

  const Analysis& a_;
  RewritePlan& plan_;
  int episode_ = -1;
  const Episode* ep_ = nullptr;
  bool selective_ = false;
  const chain::Schedule* ops_ = nullptr;
  size_t op_ = 0;
  size_t before_ = 0;
  CopyTable full_, bound_, cache_;
  std::vector<int> cached_;
  std::vector<bool> transient_;
  std::vector<Source> local_;
  std::vector<std::uint32_t> localStamp_;
  std::uint32_t stamp_ = 0;
};

// Drops clones nobody reads (a full forward computes all of abar_i, a backward node may read
// only part of it) and renumbers the rest.
void pruneUnused(RewritePlan& plan) {
  const size_t n = plan.clones.size();
  auto operandsOf = [&](const CloneOp& c) {
    return std::span<Source>(plan.operands).subspan(c.first, c.of->numOperands());
  };
  std::vector<int> uses(n, 0);
  for (const Rewire& r : plan.rewires)
    if (r.to.clone >= 0) ++uses[static_cast<size_t>(r.to.clone)];
  for (const CloneOp& c : plan.clones)
    for (const Source& s : operandsOf(c))
      if (s.clone >= 0) ++uses[static_cast<size_t>(s.clone)];
  std::vector<bool> keep(n, true);
  for (size_t i = n; i-- > 0;) {
    if (uses[i] > 0) continue;
    keep[i] = false;
    for (const Source& s : operandsOf(plan.clones[i]))
      if (s.clone >= 0) --uses[static_cast<size_t>(s.clone)];
  }
  std::vector<int> renumber(n, -1);
  std::vector<CloneOp> kept;
  std::vector<Source> operands;
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    renumber[i] = static_cast<int>(kept.size());
    CloneOp c = plan.clones[i];
    const auto first = static_cast<std::uint32_t>(operands.size());
    for (Source s : operandsOf(c)) {
      if (s.clone >= 0) s.clone = renumber[static_cast<size_t>(s.clone)];  // earlier, so renumbered
      operands.push_back(s);
    }
    c.first = first;
    kept.push_back(c);
  }
  for (Rewire& r : plan.rewires)
    if (r.to.clone >= 0) r.to.clone = renumber[static_cast<size_t>(r.to.clone)];
  plan.clones = std::move(kept);
  plan.operands = std::move(operands);
}

}  // namespace

RewritePlan planRewrite(const Analysis& a, const Candidate& candidate) {
  RewritePlan plan;
  Planner planner(a, plan);
  for (size_t e = 0; e < a.episodes.size() && e < candidate.episodes.size(); ++e)
    planner.run(static_cast<int>(e), candidate.episodes[e]);
  pruneUnused(plan);
  for (const CloneOp& c : plan.clones) plan.recomputeFlops += a.flops.at(c.of);
  return plan;
}

// ---- applying and undoing ------------------------------------------------------------------------

AppliedRewrite applyRewrite(ir::Graph& graph, const RewritePlan& plan) {
  AppliedRewrite applied;
  if (plan.clones.empty() && plan.rewires.empty()) return applied;
  const size_t original = graph.numNodes();
  graph.setInsertionPoint(nullptr);
  std::vector<ir::Node*> created;
  created.reserve(plan.clones.size());
  auto value = [&](const Source& s) -> ir::Value* {
    if (s.clone >= 0) return created[static_cast<size_t>(s.clone)]->result(s.result);
    return const_cast<ir::Value*>(s.value);
  };
  std::vector<ir::Value*> operands;
  for (const CloneOp& c : plan.clones) {
    operands.clear();
    for (size_t i = 0; i < c.of->numOperands(); ++i) operands.push_back(value(plan.operands[c.first + i]));
    created.push_back(graph.createUnchecked(c.of->op(), operands, c.of->attrs(), c.of->resultTypes(),
                                            ir::Phase::recompute, c.of->specName()));
  }
  applied.clones = created.size();
  for (const Rewire& r : plan.rewires) {
    ir::Value* old = r.node->operand(r.operand);
    r.node->setOperand(r.operand, value(r.to));
    applied.rewired.push_back({r, old});
  }
  if (!created.empty()) {
    std::vector<size_t> byPosition(plan.clones.size());
    for (size_t i = 0; i < byPosition.size(); ++i) byPosition[i] = i;
    std::stable_sort(byPosition.begin(), byPosition.end(),
                     [&](size_t x, size_t y) { return plan.clones[x].before < plan.clones[y].before; });
    std::vector<ir::Node*> order;
    order.reserve(graph.numNodes());
    const auto nodes = graph.nodes();
    size_t next = 0;
    for (size_t p = 0; p < original; ++p) {
      while (next < byPosition.size() && plan.clones[byPosition[next]].before == p)
        order.push_back(created[byPosition[next++]]);
      order.push_back(nodes[p].get());
    }
    while (next < byPosition.size()) order.push_back(created[byPosition[next++]]);
    graph.reorder(order);
  }
  return applied;
}

void undoRewrite(ir::Graph& graph, const AppliedRewrite& applied) {
  for (auto it = applied.rewired.rbegin(); it != applied.rewired.rend(); ++it)
    it->first.node->setOperand(it->first.operand, it->second);
  if (applied.clones > 0) graph.eraseIf([](const ir::Node& n) { return n.phase() == ir::Phase::recompute; });
}

ir::Graph cloneGraph(const ir::Graph& graph) {
  ir::Graph copy(graph.name());
  copy.attrs() = graph.attrs();
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const auto& in : graph.inputs()) {
    ir::Value* v = copy.addInput(in->name(), in->type());
    v->attrs() = in->attrs();
    map.emplace(in.get(), v);
  }
  for (const auto& p : graph.params()) map.emplace(p.get(), copy.addParam(p->name(), p->type(), p->attrs()));
  std::vector<ir::Value*> operands;
  for (const auto& n : graph.nodes()) {
    operands.clear();
    for (const ir::Value* v : n->operands()) operands.push_back(map.at(v));
    ir::Node* c = copy.createUnchecked(n->op(), operands, n->attrs(), n->resultTypes(), n->phase(), n->specName());
    for (size_t r = 0; r < n->numResults(); ++r) map.emplace(n->result(r), c->result(r));
  }
  for (const ir::GraphOutput& out : graph.outputs()) copy.setOutput(out.name, map.at(out.value));
  return copy;
}

}  // namespace remat
}  // namespace gradc::passes
