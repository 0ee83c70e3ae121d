// The rewrite that makes a remat proposal real (stage 4 of passes/remat_strategies.h):
// planRewrite (pure), applyRewrite, undoRewrite, and cloneGraph.
#include "passes/remat_strategies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <span>

#include "passes/collective_seq.h"

namespace gradc::passes {
namespace remat {

// ---- the rewrite planner -------------------------------------------------------------------------

namespace {

// Copies of droppable values, by dense value id: which copy backward readers get now.
class CopyTable {
 public:
  void resize(size_t n) {
    source_.assign(n, RewriteSource{});
    held_.assign(n, 0);
  }
  const RewriteSource* find(int id) const { return held_[static_cast<size_t>(id)] ? &source_[static_cast<size_t>(id)] : nullptr; }
  void set(int id, RewriteSource s) {
    source_[static_cast<size_t>(id)] = s;
    held_[static_cast<size_t>(id)] = 1;
  }
  void erase(int id) { held_[static_cast<size_t>(id)] = 0; }

 private:
  std::vector<RewriteSource> source_;
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

  // The FLOPs of each clone planned so far, in plan order.
  const std::vector<std::int64_t>& cloneFlops() const { return cloneFlops_; }

  void run(int episode, const EpisodePlan& p) {
    const Episode& ep = a_.episodes[static_cast<size_t>(episode)];
    const bool free = p.kind == EpisodePlan::Kind::Free || (p.kind == EpisodePlan::Kind::Schedule && p.freeInside);
    const std::vector<BackwardUse>& uses = free ? ep.freeUses : ep.uses;
    if (p.kind == EpisodePlan::Kind::Keep || uses.empty()) return;
    episode_ = episode;
    ep_ = &ep;
    // Selective and Free recompute on demand only, the values of one set.
    selective_ = p.kind == EpisodePlan::Kind::Selective || p.kind == EpisodePlan::Kind::Free;
    const bool inside = p.kind == EpisodePlan::Kind::Schedule && (p.selectiveInside || p.freeInside);
    free_ = free ? &p : nullptr;
    selectiveInside_ = inside;
    transient_.assign(ep.stages.size(), false);
    keptStage_.assign(ep.stages.size(), false);
    for (std::vector<int>& byStage : compiled_) byStage.assign(ep.stages.size(), -1);
    forwards_.clear();
    steps_.clear();
    operandValue_.clear();
    operandInfo_.clear();
    resultInfo_.clear();
    kept_.clear();
    clearCache();
    ops_ = selective_ ? nullptr : &p.schedule;
    op_ = 0;
    if (ops_) firstPass();
    auto visit = [&](const BackwardUse& use) {
      before_ = use.position;
      if (ops_) advance(use.label);
      for (unsigned i : use.operands) {
        const ir::Value* v = use.node->operand(i);
        RewriteSource s = resolve(v);
        if (s.clone >= 0 || s.value != v) plan_.rewires.push_back(Rewire{use.node, i, s});
      }
    };
    // The free-recompute path also recomputes for the tail's forward readers (they come first).
    if (p.kind == EpisodePlan::Kind::Free && p.freeChosen)
      for (const BackwardUse& use : ep.freeTailUses) visit(use);
    for (const BackwardUse& use : uses) visit(use);
    // Leave the tables empty for the next episode.
    for (size_t s = 0; s < ep.stages.size(); ++s) {
      clearFull(static_cast<int>(s));
      clearBound(static_cast<int>(s));
    }
    clearCache();
  }

 private:
  int idOf(const ir::Value* v) const { return a_.values.find(v)->id; }

  void clearFull(int stage) {
    for (const ir::Value* v : ep_->stages[static_cast<size_t>(stage)].stored)
      if (const ValueInfo* it = a_.values.find(v)) full_.erase(it->id);
  }
  void clearBound(int stage) {
    for (const ir::Value* v : ep_->stages[static_cast<size_t>(stage)].boundary)
      if (const ValueInfo* it = a_.values.find(v)) bound_.erase(it->id);
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
        keptStage_[static_cast<size_t>(op.stage)] = true;
        for (const ir::Value* v : st.stored)
          if (const ValueInfo* it = a_.values.find(v)) full_.set(it->id, RewriteSource{v});
      } else {
        clearBound(op.stage);
        for (const ir::Value* v : st.boundary)
          if (const ValueInfo* it = a_.values.find(v)) bound_.set(it->id, RewriteSource{v});
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

  // A stage's forward (every stored node, or the boundary nodes only) as flat arrays, made on
  // its first run in the episode: each node with its operands' and results' value-table
  // entries (nullptr: not in the table), and the values the forward keeps. A memory-poor plan
  // runs each stage's forward many times; walking these instead of the nodes, and looking
  // every value up once per episode instead of once per run, is most of its planning time.
  struct CompiledStep {
    const ir::Node* node;
    std::int64_t flops;
    std::uint32_t operands;  // first of numOperands in operandValue_/operandInfo_
    std::uint32_t results;   // first of numResults in resultInfo_
    std::uint32_t numOperands, numResults;
  };
  struct CompiledForward {
    std::uint32_t firstStep, endStep;  // in steps_
    std::uint32_t firstKept, endKept;  // in kept_
  };

  const CompiledForward& compiled(int stage, bool all) {
    int& index = compiled_[all ? 1 : 0][static_cast<size_t>(stage)];
    if (index >= 0) return forwards_[static_cast<size_t>(index)];
    const GraphStage& st = ep_->stages[static_cast<size_t>(stage)];
    CompiledForward f;
    f.firstStep = static_cast<std::uint32_t>(steps_.size());
    for (const ir::Node* n : all ? st.storedNodes : st.boundaryNodes) {
      steps_.push_back(CompiledStep{n, a_.flopsOf(n), static_cast<std::uint32_t>(operandValue_.size()),
                                    static_cast<std::uint32_t>(resultInfo_.size()),
                                    static_cast<std::uint32_t>(n->numOperands()),
                                    static_cast<std::uint32_t>(n->numResults())});
      for (const ir::Value* u : n->operands()) {
        operandValue_.push_back(u);
        operandInfo_.push_back(a_.values.find(u));
      }
      for (unsigned r = 0; r < n->numResults(); ++r) resultInfo_.push_back(a_.values.find(n->result(r)));
    }
    f.endStep = static_cast<std::uint32_t>(steps_.size());
    f.firstKept = static_cast<std::uint32_t>(kept_.size());
    for (const ir::Value* v : all ? st.stored : st.boundary)
      if (const ValueInfo* info = a_.values.find(v)) kept_.push_back(info);
    f.endKept = static_cast<std::uint32_t>(kept_.size());
    index = static_cast<int>(forwards_.size());
    forwards_.push_back(f);
    return forwards_.back();
  }

  void forward(const chain::Op& op) {
    const auto i = static_cast<size_t>(op.stage);
    const bool all = op.kind == chain::OpKind::ForwardAll;
    const CompiledForward f = compiled(op.stage, all);
    ++stamp_;  // this forward's own results: local_[id] where localStamp_[id] == stamp_
    for (std::uint32_t k = f.firstStep; k < f.endStep; ++k) {
      const CompiledStep& step = steps_[k];
      // Resolved before any is appended: resolving may recompute on demand (a dropped prefix
      // value), and those clones append their own operands.
      sources_.clear();
      for (std::uint32_t j = step.operands; j < step.operands + step.numOperands; ++j) {
        const ValueInfo* info = operandInfo_[j];
        if (info && localStamp_[static_cast<size_t>(info->id)] == stamp_)
          sources_.push_back(local_[static_cast<size_t>(info->id)]);
        else
          sources_.push_back(resolve(operandValue_[j], info));
      }
      const auto first = static_cast<std::uint32_t>(plan_.operands.size());
      plan_.operands.insert(plan_.operands.end(), sources_.begin(), sources_.end());
      const int id = emit(step.node, first, step.flops);
      for (unsigned r = 0; r < step.numResults; ++r)
        if (const ValueInfo* info = resultInfo_[step.results + r]) {
          local_[static_cast<size_t>(info->id)] = RewriteSource{nullptr, id, r};
          localStamp_[static_cast<size_t>(info->id)] = stamp_;
        }
    }
    if (all) clearFull(op.stage);
    else clearBound(op.stage);
    CopyTable& kept = all ? full_ : bound_;
    for (std::uint32_t k = f.firstKept; k < f.endKept; ++k) {
      const auto id = static_cast<size_t>(kept_[k]->id);
      if (localStamp_[id] == stamp_) kept.set(kept_[k]->id, local_[id]);
    }
    if (!all) transient_[i] = op.kind == chain::OpKind::ForwardTransient;
    consumeTransientInput(op.stage);
  }

  // A clone of `of` (costing `flops`) whose operands were just appended to plan_.operands from
  // `first`.
  int emit(const ir::Node* of, std::uint32_t first, std::int64_t flops) {
    plan_.clones.push_back(CloneOp{of, before_, first, of->id()});
    cloneFlops_.push_back(flops);
    return static_cast<int>(plan_.clones.size()) - 1;
  }

  // Whether the plan recomputes the cheap value v (selective, selective or free inside stored
  // stages, free) instead of keeping it.
  bool dropped(const ir::Value* v) const {
    if (!free_) return ep_->selectiveDrop.count(v) > 0;
    auto it = ep_->freeDrop.find(v);
    return it != ep_->freeDrop.end() && free_->dropsFree(it->second);
  }

  // The copy of v that readers should use now, or nullopt when v must be recomputed.
  std::optional<RewriteSource> lookup(const ir::Value* v) const { return lookup(v, a_.values.find(v)); }
  // The same, given v's entry in the value table (nullptr: not in it).
  std::optional<RewriteSource> lookup(const ir::Value* v, const ValueInfo* info) const {
    if (!info || info->episode != episode_) return RewriteSource{v};
    const int id = info->id;
    // A prefix value (stage -1) is in the table only to be recomputed by plans dropping freeDrop.
    if (info->stage < 0 && !free_) return RewriteSource{v};
    if (selective_ && !dropped(v)) return RewriteSource{v};
    if (!selective_ && info->stage >= 0) {
      // The schedule's copies first: a full forward replaces older on-demand ones. With
      // selective recompute inside stored stages, a cheap value the first pass stored is
      // recomputed on demand instead (its recomputed copies are used as they are).
      if (const RewriteSource* s = full_.find(id); s && !(selectiveInside_ && s->clone < 0 && dropped(v)))
        return *s;
      // ... and, as selective does, the other values of a stage the first pass stored are read
      // where they are (the inputs of its recomputed cheap values).
      if (selectiveInside_ && keptStage_[static_cast<size_t>(info->stage)] && !dropped(v))
        return RewriteSource{v};
      if (const RewriteSource* s = bound_.find(id)) return *s;
    }
    if (info->stage < 0 && !dropped(v)) return RewriteSource{v};
    if (const RewriteSource* s = cache_.find(id)) return *s;
    return std::nullopt;
  }

  // Whether an on-demand clone of n exists (all its results are cached together).
  bool cloned(const ir::Node& n) const {
    for (size_t r = 0; r < n.numResults(); ++r)
      if (const ValueInfo* it = a_.values.find(n.result(r))) return cache_.find(it->id) != nullptr;
    return false;
  }

  // lookup(), recomputing v (and what it needs) on demand; iterative, so long chains of
  // dropped values cannot exhaust the stack.
  RewriteSource resolve(const ir::Value* v) { return resolve(v, a_.values.find(v)); }
  RewriteSource resolve(const ir::Value* v, const ValueInfo* info) {
    if (std::optional<RewriteSource> s = lookup(v, info)) return *s;
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
      const int id = emit(n, first, a_.flopsOf(n));
      if (!selective_) ++plan_.onDemandClones;
      for (unsigned r = 0; r < n->numResults(); ++r)
        if (const ValueInfo* it = a_.values.find(n->result(r))) {
          cache_.set(it->id, RewriteSource{nullptr, id, r});
          cached_.push_back(it->id);
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
  bool selectiveInside_ = false;
  // A plan dropping freeDrop values (Free, freeInside; prefix values in freeDrop are
  // recomputed too), during run().
  const EpisodePlan* free_ = nullptr;
  const chain::Schedule* ops_ = nullptr;
  size_t op_ = 0;
  size_t before_ = 0;
  CopyTable full_, bound_, cache_;
  std::vector<int> cached_;
  std::vector<bool> transient_;
  std::vector<bool> keptStage_;  // stored by the first pass (selectiveInside_ reads their values)
  std::vector<RewriteSource> local_;
  std::vector<RewriteSource> sources_;  // one node's operands while they are resolved
  std::vector<std::uint32_t> localStamp_;
  std::uint32_t stamp_ = 0;
  std::vector<int> compiled_[2];  // by stage: index in forwards_ of its boundary-only [0] and full [1] forward
  std::vector<CompiledForward> forwards_;
  std::vector<CompiledStep> steps_;
  std::vector<const ir::Value*> operandValue_;
  std::vector<const ValueInfo*> operandInfo_;
  std::vector<const ValueInfo*> resultInfo_;
  std::vector<const ValueInfo*> kept_;
  std::vector<std::int64_t> cloneFlops_;  // by clone
};

// Drops clones nobody reads (a full forward computes all of abar_i, a backward node may read
// only part of it), renumbers the rest and sums the FLOPs of those kept (`flops`: by clone).
// Clones were appended each right after its operands, so clone i's operands run up to the next
// clone's first: the nodes themselves are never read.
void pruneUnused(RewritePlan& plan, const std::vector<std::int64_t>& flops) {
  const size_t n = plan.clones.size();
  std::vector<std::uint32_t> end(n);
  for (size_t i = 0; i < n; ++i)
    end[i] = i + 1 < n ? plan.clones[i + 1].first : static_cast<std::uint32_t>(plan.operands.size());
  auto operandsOf = [&](size_t i) {
    return std::span<RewriteSource>(plan.operands).subspan(plan.clones[i].first, end[i] - plan.clones[i].first);
  };
  std::vector<int> uses(n, 0);
  for (const Rewire& r : plan.rewires)
    if (r.to.clone >= 0) ++uses[static_cast<size_t>(r.to.clone)];
  for (size_t i = 0; i < n; ++i)
    for (const RewriteSource& s : operandsOf(i))
      if (s.clone >= 0) ++uses[static_cast<size_t>(s.clone)];
  std::vector<bool> keep(n, true);
  for (size_t i = n; i-- > 0;) {
    if (uses[i] > 0) continue;
    keep[i] = false;
    for (const RewriteSource& s : operandsOf(i))
      if (s.clone >= 0) --uses[static_cast<size_t>(s.clone)];
  }
  // Compacted in place: a kept clone's operands move only towards the front.
  std::vector<int> renumber(n, -1);
  size_t keptClones = 0;
  std::uint32_t keptOperands = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    renumber[i] = static_cast<int>(keptClones);
    CloneOp c = plan.clones[i];
    const std::uint32_t first = keptOperands;
    for (RewriteSource s : operandsOf(i)) {
      if (s.clone >= 0) s.clone = renumber[static_cast<size_t>(s.clone)];  // earlier, so renumbered
      plan.operands[keptOperands++] = s;
    }
    c.first = first;
    plan.clones[keptClones++] = c;
    plan.recomputeFlops += flops[i];
  }
  for (Rewire& r : plan.rewires)
    if (r.to.clone >= 0) r.to.clone = renumber[static_cast<size_t>(r.to.clone)];
  plan.clones.resize(keptClones);
  plan.operands.resize(keptOperands);
}

}  // namespace

RewritePlan planRewrite(const Analysis& a, const Candidate& candidate) {
  RewritePlan plan;
  Planner planner(a, plan);
  for (size_t e = 0; e < a.episodes.size() && e < candidate.episodes.size(); ++e)
    planner.run(static_cast<int>(e), candidate.episodes[e]);
  pruneUnused(plan, planner.cloneFlops());
  regatherForRecompute(plan, a.prefetchGathers);
  // Plans are kept while proposals are compared: without the growth slack.
  plan.clones.shrink_to_fit();
  plan.operands.shrink_to_fit();
  plan.rewires.shrink_to_fit();
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
  auto value = [&](const RewriteSource& s) -> ir::Value* {
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
    // Gathers made again for recompute: every rank numbers its collectives in the new order.
    if (std::any_of(plan.clones.begin(), plan.clones.end(), [](const CloneOp& c) { return c.of->op().issuesCollective; }))
      applied.renumbered = renumberCollectives(graph);
  }
  return applied;
}

void undoRewrite(ir::Graph& graph, const AppliedRewrite& applied) {
  for (auto it = applied.rewired.rbegin(); it != applied.rewired.rend(); ++it)
    it->first.node->setOperand(it->first.operand, it->second);
  for (const auto& [node, seq] : applied.renumbered) node->attrs()["seq"] = seq;
  if (applied.clones > 0) graph.eraseIf([](const ir::Node& n) { return n.phase() == ir::Phase::recompute; });
}

ir::Graph cloneGraph(const ir::Graph& graph) {
  ir::Graph copy(graph.name());
  copy.attrs() = graph.attrs();
  // The copy of each value, by the original's id.
  std::vector<ir::Value*> map(graph.valueIdBound(), nullptr);
  for (const auto& in : graph.inputs()) {
    ir::Value* v = copy.addInput(in->name(), in->type());
    v->attrs() = in->attrs();
    map[in->id()] = v;
  }
  for (const auto& p : graph.params()) map[p->id()] = copy.addParam(p->name(), p->type(), p->attrs());
  std::vector<ir::Value*> operands;
  for (const auto& n : graph.nodes()) {
    operands.clear();
    for (const ir::Value* v : n->operands()) operands.push_back(map[v->id()]);
    ir::Node* c = copy.createUnchecked(n->op(), operands, n->attrs(), n->resultTypes(), n->phase(), n->specName());
    for (size_t r = 0; r < n->numResults(); ++r) map[n->result(r)->id()] = c->result(r);
  }
  for (const ir::GraphOutput& out : graph.outputs()) copy.setOutput(out.name, map[out.value->id()]);
  return copy;
}

}  // namespace remat
}  // namespace gradc::passes
