// The analysis of a joint graph for remat (stages 1 and 2 of passes/remat_strategies.h):
// episodes, the articulation chain of each, the per-stage cost model and the backward uses.
#include "passes/remat_strategies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <span>

#include "passes/shard_params.h"

namespace gradc::passes {

namespace remat {

namespace {

using ValueSet = std::unordered_set<const ir::Value*>;

// Position of each forward node of the episode being analysed, by node id; -1 for the others.
using Positions = std::vector<int>;
// A flag per value id (pinned, a stage boundary, ...).
using ValueFlags = std::vector<std::uint8_t>;

// A set of values by id that empties in O(1) (a new stamp), for the many small sets of one
// analysis (a stage's counted buffers, a closure's needed values).
class ValueMarks {
 public:
  explicit ValueMarks(size_t valueIdBound) : stamp_(valueIdBound, 0) {}
  void clear() { ++current_; }
  // Marks v; whether it was unmarked.
  bool insert(const ir::Value* v) {
    if (stamp_[v->id()] == current_) return false;
    stamp_[v->id()] = current_;
    return true;
  }
  bool count(const ir::Value* v) const { return stamp_[v->id()] == current_; }

 private:
  std::vector<std::uint32_t> stamp_;
  std::uint32_t current_ = 1;
};

int positionOf(const Positions& localPos, const ir::Node* n) { return localPos[n->id()]; }
bool flagged(const ValueFlags& flags, const ir::Value* v) { return flags[v->id()] != 0; }

bool isForward(const ir::Node& n) { return n.phase() == ir::Phase::fwd; }

// ---- chain detection -----------------------------------------------------------------------------

struct ChainCuts {
  int prefixEnd = -1;  // last prefix position (-1: no prefix)
  int tailBegin = 0;   // first tail position (== F: no tail)
  std::vector<int> cuts;  // a cut at p: a stage ends after position p
  int score() const { return static_cast<int>(cuts.size()) + 1; }
};

// lastUse[p]: the last forward position < tailBegin reading a result of node p (-1 if none).
std::vector<int> lastUses(const std::vector<const ir::Node*>& fwd, const Positions& localPos, int tailBegin) {
  std::vector<int> last(fwd.size(), -1);
  for (size_t p = 0; p < fwd.size(); ++p)
    for (size_t r = 0; r < fwd[p]->numResults(); ++r)
      for (const ir::Use& u : fwd[p]->result(r)->uses()) {
        const int user = positionOf(localPos, u.user);
        if (user < 0 || user >= tailBegin) continue;
        last[p] = std::max(last[p], user);
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

ChainCuts findChain(const std::vector<const ir::Node*>& fwd, const Positions& localPos) {
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
std::vector<const ir::Node*> closure(const std::vector<const ir::Node*>& nodes, const std::vector<const ir::Value*>& targets,
                                     ValueMarks& needed) {
  needed.clear();
  for (const ir::Value* v : targets) needed.insert(v);
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

// Free recompute's values (Episode::freeDrop) among an episode's forward nodes `fwd`: cheap
// values whose operands the backward holds anyway (parameters, inputs, pinned values, values a
// non-forward node reads) or are free themselves. Walked in program order, so an operand's
// membership is known before its readers'; a value's tier is the most FLOPs per element of a
// node its recompute runs, its depth how many nodes deep that recompute goes.
std::unordered_map<const ir::Value*, Episode::FreeValue> freeValues(const std::vector<const ir::Node*>& fwd,
                                                                   const Analysis& a, const Positions& localPos,
                                                                   const ValueFlags& pinned) {
  std::unordered_map<const ir::Value*, Episode::FreeValue> free;
  auto readByBackward = [](const ir::Value* u) {
    for (const ir::Use& use : u->uses())
      if (!isForward(*use.user)) return true;
    return false;
  };
  auto heldAnyway = [&](const ir::Value* u) {
    if (u->kind() != ir::ValueKind::Result || flagged(pinned, u)) return true;
    return positionOf(localPos, u->producer()) >= 0 && readByBackward(u);
  };
  for (size_t position = 0; position < fwd.size(); ++position) {
    const ir::Node* n = fwd[position];
    const std::int64_t flops = a.flopsOf(n);
    if (!cheap(*n, flops)) continue;
    std::int64_t elements = 0;
    for (size_t r = 0; r < n->numResults(); ++r) elements += n->result(r)->type().numel();
    elements = std::max<std::int64_t>(elements, 1);
    Episode::FreeValue info{(flops + elements - 1) / elements, 1, static_cast<int>(position)};
    bool isFree = true;
    for (const ir::Value* u : n->operands()) {
      if (heldAnyway(u)) continue;
      auto it = free.find(u);
      if (it == free.end()) {
        isFree = false;
        break;
      }
      info.tier = std::max(info.tier, it->second.tier);
      info.depth = std::max(info.depth, it->second.depth + 1);
      info.position = std::max(info.position, it->second.position);
    }
    if (!isFree) continue;
    for (size_t r = 0; r < n->numResults(); ++r)
      if (!flagged(pinned, n->result(r))) {
        info.readByBackward = readByBackward(n->result(r));
        info.index = static_cast<int>(free.size());
        free.emplace(n->result(r), info);
      }
  }
  return free;
}

}  // namespace

// ---- analysis ------------------------------------------------------------------------------------

Expected<Analysis> analyze(ir::Graph& graph) {
  Analysis a;
  const auto nodes = graph.nodes();
  const ir::KernelSetting kernels = graph.kernelSetting();
  a.numNodes = nodes.size();
  a.prefetchGathers = ir::getBool(graph.attrs(), kPrefetchGathersAttr).value_or(false);
  for (const auto& n : nodes)
    if (n->phase() == ir::Phase::recompute)
      return Error{"remat: the graph already has recompute nodes (remat runs once, on a graph without them)"};

  // Kept whatever the plan: graph outputs, and the results of side-effect nodes (collectives:
  // recomputing one would issue it twice on this rank only, and the ranks would disagree).
  ValueFlags pinned(graph.valueIdBound(), 0);
  for (const ir::GraphOutput& out : graph.outputs()) pinned[out.value->id()] = 1;
  for (const auto& n : nodes)
    if (n->op().sideEffects)
      for (size_t r = 0; r < n->numResults(); ++r) pinned[n->result(r)->id()] = 1;
  std::vector<size_t> position(graph.nodeIdBound());  // program position by node id
  for (size_t i = 0; i < nodes.size(); ++i) position[nodes[i]->id()] = i;
  a.flops.assign(graph.nodeIdBound(), 0);
  Positions localPos(graph.nodeIdBound(), -1);
  // Stage boundaries of every episode so far (a backward use reads its own episode's only).
  ValueFlags boundaries(graph.valueIdBound(), 0);
  ValueMarks scratch(graph.valueIdBound());  // a set each use empties first

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
    if (e > 0)  // the previous episode's positions
      for (size_t p = a.episodes[e - 1].forwardBegin; p < a.episodes[e - 1].forwardEnd; ++p) localPos[nodes[p]->id()] = -1;
    for (size_t p = ep.forwardBegin; p < ep.forwardEnd; ++p) {
      localPos[nodes[p]->id()] = static_cast<int>(fwd.size());
      fwd.push_back(nodes[p].get());
      const std::int64_t f = nodes[p]->flops();
      a.flops[nodes[p]->id()] = f;
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
          m.forwardCost += a.flopsOf(n);
          for (size_t r = 0; r < n->numResults(); ++r) {
            const ir::Value* v = n->result(r);
            if (flagged(pinned, v)) continue;
            bool readByNext = false, readByBackward = false;
            for (const ir::Use& u : v->uses()) {
              if (!isForward(*u.user)) {
                readByBackward = true;
                continue;
              }
              const int user = positionOf(localPos, u.user);
              if (user >= 0 && stageOfPos[static_cast<size_t>(user)] == static_cast<int>(s) + 1) readByNext = true;
            }
            if (readByNext) st.boundary.push_back(v);
            if (readByNext || readByBackward) st.stored.push_back(v);
          }
        }
        // Bytes by buffer: views share their source's storage (OpInfo::view), which counts
        // once, in the stage that allocates it.
        auto bytes = [&](const std::vector<const ir::Value*>& values) {
          scratch.clear();
          std::int64_t total = 0;
          for (const ir::Value* v : values) {
            const ir::Value* root = storage(v);
            if (root->kind() != ir::ValueKind::Result) continue;
            const int at = positionOf(localPos, root->producer());
            if (at < 0 || stageOfPos[static_cast<size_t>(at)] != static_cast<int>(s)) continue;
            if (scratch.insert(root)) total += root->type().bytes();
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
        if (!boundary.count(v) && cheap(*v->producer(), a.flopsOf(v->producer()))) ep.selectiveDrop.insert(v);
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
    // The same chain with selective (or free) recompute inside the stages it stores: a stored
    // stage keeps what it stores less its dropped values (recomputed from the kept ones in its
    // own backward, whose cost the rewrite counts exactly).
    auto lessDropped = [&](auto dropped) {
      std::vector<chain::Stage> model = ep.model;
      for (size_t g = 0; g < ep.stages.size(); ++g) {
        std::int64_t bytes = 0;
        for (const ir::Value* v : ep.stages[g].stored)
          if (storage(v) == v && dropped(v)) bytes += v->type().bytes();
        model[g].storedBytes = std::max(model[g].boundaryBytes, model[g].storedBytes - bytes);
      }
      return model;
    };
    ep.selectiveModel = lessDropped([&](const ir::Value* v) { return ep.selectiveDrop.count(v) > 0; });
    // Free recompute, only on graphs small enough for its proposals (remat_strategies.cpp:
    // freePays).
    if (a.numNodes <= kExhaustiveMaxNodes) {
      ep.freeDrop = freeValues(fwd, a, localPos, pinned);
      ep.freeModel = lessDropped([&](const ir::Value* v) { return ep.freeDrop.count(v) > 0; });
    }
    for (GraphStage& g : ep.stages) {
      g.boundaryNodes = closure(g.nodes, g.boundary, scratch);
      g.storedNodes = closure(g.nodes, g.stored, scratch);
    }
    // External buffers: the storage (through views) of prefix values that stage nodes read,
    // unless a backward node reads that storage anyway.
    {
      auto inPrefix = [&](const ir::Node* n) {
        const int at = positionOf(localPos, n);
        return at >= 0 && at < ep.prefixNodes;
      };
      std::unordered_map<const ir::Value*, int> roots;  // buffer -> the last (grouped) stage reading it
      for (size_t g = 0; g < ep.stages.size(); ++g)
        for (const ir::Node* n : ep.stages[g].nodes)
          for (const ir::Value* u : n->operands()) {
            if (!u->producer() || !inPrefix(u->producer())) continue;
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
          if (!flagged(pinned, n->result(r)))
            a.values.add(n->result(r), static_cast<int>(e), static_cast<int>(s));
    for (int p = 0; p < ep.prefixNodes; ++p) {
      const ir::Node* n = fwd[static_cast<size_t>(p)];
      for (size_t r = 0; r < n->numResults(); ++r)
        if (ep.freeDrop.count(n->result(r))) a.values.add(n->result(r), static_cast<int>(e), -1);
    }

    // Backward uses of stage values, labelled with their stage.
    for (const GraphStage& st : ep.stages)
      for (const ir::Value* v : st.boundary) boundaries[v->id()] = 1;
    const int lastStage = static_cast<int>(ep.stages.size()) - 1;
    int current = lastStage;
    for (size_t p = ep.forwardEnd; p < ep.end; ++p) {
      ir::Node* n = nodes[p].get();
      BackwardUse use{n, p, -1, {}};
      std::vector<unsigned> prefixOperands;  // prefix values in freeDrop (freeUses only)
      int lo = 0, hi = lastStage, latest = -1;  // the stages the operands allow
      for (unsigned i = 0; i < n->numOperands(); ++i) {
        const ValueInfo* info = a.values.find(n->operand(i));
        if (!info || info->episode != static_cast<int>(e)) continue;
        const int s = info->stage;
        if (s < 0) {
          prefixOperands.push_back(i);
          continue;
        }
        use.operands.push_back(i);
        latest = std::max(latest, s);
        lo = std::max(lo, s);
        hi = std::min(hi, flagged(boundaries, n->operand(i)) ? s + 1 : s);
      }
      if (use.operands.empty()) {
        if (!prefixOperands.empty()) ep.freeUses.push_back(BackwardUse{n, p, current, std::move(prefixOperands)});
        continue;
      }
      use.label = lo <= hi && lo <= current ? std::min(hi, current) : latest;
      current = std::min(current, use.label);
      ep.uses.push_back(use);
      if (ep.freeDrop.empty()) continue;  // no free recompute (above)
      if (!prefixOperands.empty()) {
        use.operands.insert(use.operands.end(), prefixOperands.begin(), prefixOperands.end());
        std::sort(use.operands.begin(), use.operands.end());
      }
      ep.freeUses.push_back(std::move(use));
    }

    if (!ep.freeDrop.empty() && ep.tailNodes > 0) {
      const size_t tailBegin = ep.forwardEnd - static_cast<size_t>(ep.tailNodes);
      for (size_t p = tailBegin; p < ep.forwardEnd; ++p) {
        ir::Node* n = nodes[p].get();
        BackwardUse use{n, p, lastStage, {}};
        for (unsigned i = 0; i < n->numOperands(); ++i) {
          const ir::Value* u = n->operand(i);
          if (!ep.freeDrop.count(u) || position[u->producer()->id()] >= tailBegin) continue;
          use.operands.push_back(i);
        }
        if (!use.operands.empty()) ep.freeTailUses.push_back(std::move(use));
      }
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
        std::int64_t temporary = n->workspaceBytes(kernels);
        for (size_t r = 0; r < n->numResults(); ++r) {
          const ir::Value* v = n->result(r);
          bool survives = v->isGraphOutput();
          for (const ir::Use& u : v->uses())
            if (!survives) survives = position[u.user->id()] >= limit;
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

}  // namespace remat
}  // namespace gradc::passes
