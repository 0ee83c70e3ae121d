#include "passes/memory/step_graph.h"

#include <algorithm>
#include <numeric>

#include "passes/memory/rewrite_plan.h"

namespace gradc::passes {

// ---- facts ---------------------------------------------------------------------------------------

StepFacts::StepFacts(const ir::Graph& graph, const StorageModel& storage) : graph_(&graph) {
  const size_t n = graph.numNodes();
  nodes_.reserve(n);
  nodeIndex_.assign(graph.nodeIdBound(), -1);
  storage_.assign(graph.valueIdBound(), Storage::Persistent);
  bytes_.assign(graph.valueIdBound(), 0);
  producer_.assign(graph.valueIdBound(), -1);
  flags_.assign(n, 0);
  workspace_.assign(n, 0);
  seq_.assign(n, 0);
  std::vector<int> paramIndex(graph.valueIdBound(), -1);
  numParams_ = graph.params().size();
  for (size_t p = 0; p < graph.params().size(); ++p) paramIndex[graph.params()[p]->id()] = static_cast<int>(p);
  for (const ir::Value* v : persistentValues(graph)) persistentBytes_ += v->type().bytes();

  std::vector<char> written(numParams_, 0);
  std::vector<int> stamp(numParams_, -1);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = *graph.nodes()[i];
    nodes_.push_back(&node);
    nodeIndex_[node.id()] = static_cast<int>(i);
    std::uint8_t f = 0;
    if (node.phase() == ir::Phase::recompute) f |= kStepRecompute;
    if (node.op().sideEffects) f |= kStepSideEffects;
    if (node.op().issuesCollective) {
      f |= kStepIssuesCollective;
      seq_[i] = ir::getInt(node.attrs(), "seq").value_or(0);
    }
    if (node.op().collective == ir::Collective::ReduceScatterWait) f |= kStepReduceScatterWait;
    bool allFresh = node.numResults() > 0;
    for (const ir::Value* v : node.operands()) operands_.items.push_back(static_cast<int>(v->id()));
    operands_.endRow();
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* v = node.result(r);
      results_.items.push_back(static_cast<int>(v->id()));
      producer_[v->id()] = static_cast<int>(i);
      if (storage.isView(v)) {
        storage_[v->id()] = Storage::View;
        allFresh = false;
      } else {
        storage_[v->id()] = Storage::Owns;
        bytes_[v->id()] = v->type().bytes();
      }
    }
    results_.endRow();
    if (allFresh) f |= kStepAllFresh;
    flags_[i] = f;
    workspace_[i] = storage.workspaceBytes(&node);
    if (node.op().sideEffects)
      for (const ir::Value* v : node.operands()) {
        if (v->kind() != ir::ValueKind::Param) continue;
        const int p = paramIndex[v->id()];
        written[static_cast<size_t>(p)] = 1;
        if (stamp[static_cast<size_t>(p)] == static_cast<int>(i)) continue;
        stamp[static_cast<size_t>(p)] = static_cast<int>(i);
        paramsWritten_.items.push_back(p);
      }
    paramsWritten_.endRow();
  }
  std::fill(stamp.begin(), stamp.end(), -1);
  for (size_t i = 0; i < n; ++i) {
    for (const ir::Value* v : nodes_[i]->operands()) {
      const ir::Value* owner = storage.owner(v);
      if (owner->kind() != ir::ValueKind::Param) continue;
      const int p = paramIndex[owner->id()];
      if (!written[static_cast<size_t>(p)] || stamp[static_cast<size_t>(p)] == static_cast<int>(i)) continue;
      stamp[static_cast<size_t>(p)] = static_cast<int>(i);
      paramsTouched_.items.push_back(p);
    }
    paramsTouched_.endRow();
  }
  for (const ir::GraphOutput& out : graph.outputs()) outputs_.push_back(static_cast<int>(out.value->id()));
}

// ---- the builder ---------------------------------------------------------------------------------

// Where an operand comes from: a value of the facts' graph (by id), or result `result` of
// clone `clone`.
struct Operand {
  int value = -1;
  int clone = -1;
  unsigned result = 0;
};

class StepGraphBuilder {
 public:
  StepGraphBuilder(const StepFacts& f, const RewritePlan* plan) : f_(f), plan_(plan) {}

  StepGraph build() {
    placeNodes();
    indexRewires();
    valueGroup_.assign(f_.storage_.size(), -1);
    const size_t n = origin_.size();
    g_.nodes.resize(n);
    g_.flags.resize(n);
    g_.workspace.resize(n);
    g_.fresh.assign(n, 0);
    g_.groupStart.reserve(n + 1);
    g_.producers.start.reserve(n + 1);
    g_.groupsRead.start.reserve(n + 1);
    nodeStamp_.assign(n, -1);
    // The lists grow to at most these sizes: reserved once instead of grown by doubling (a
    // memory-poor plan's step graph has millions of nodes).
    size_t operands = 0, results = 0;
    for (int o : origin_) {
      operands += f_.operands_[static_cast<size_t>(o)].size();
      results += f_.results_[static_cast<size_t>(o)].size();
    }
    for (std::vector<int>* list : {&g_.producers.items, &g_.groupsRead.items}) list->reserve(operands);
    g_.groupBytes.reserve(results);
    g_.groupProducer.reserve(results);
    g_.groupPinned.reserve(results);
    used_.reserve(results);
    groupStamp_.reserve(results);
    firstProducer_.reserve(n);
    for (size_t i = 0; i < n; ++i) addNode(static_cast<int>(i));
    g_.groupStart.push_back(static_cast<int>(g_.groupBytes.size()));
    finish();
    g_.valueGroup = std::move(valueGroup_);
    return std::move(g_);
  }

 private:
  // The new program order: clone c before base node `before`, in creation order among those at
  // one position; clones past the last node at the end (as applyRewrite places them).
  void placeNodes() {
    const size_t base = f_.nodes_.size();
    const size_t clones = plan_ ? plan_->clones.size() : 0;
    baseAt_.resize(base);
    cloneAt_.resize(clones);
    std::vector<size_t> byPosition(clones);
    std::iota(byPosition.begin(), byPosition.end(), 0);
    // Plans usually create clones in position order already.
    auto earlier = [&](size_t x, size_t y) { return plan_->clones[x].before < plan_->clones[y].before; };
    if (!std::is_sorted(byPosition.begin(), byPosition.end(), earlier))
      std::stable_sort(byPosition.begin(), byPosition.end(), earlier);
    origin_.reserve(base + clones);
    cloneOf_.reserve(base + clones);
    size_t next = 0;
    auto place = [&](int node, int clone) {
      (clone >= 0 ? cloneAt_[static_cast<size_t>(clone)] : baseAt_[static_cast<size_t>(node)]) =
          static_cast<int>(origin_.size());
      origin_.push_back(node);
      cloneOf_.push_back(clone);
    };
    cloneBase_.resize(clones);
    for (size_t c = 0; c < clones; ++c) cloneBase_[c] = f_.nodeIndex_[plan_->clones[c].node];
    for (size_t p = 0; p < base; ++p) {
      for (; next < clones && plan_->clones[byPosition[next]].before == p; ++next) {
        const size_t c = byPosition[next];
        place(cloneBase_[c], static_cast<int>(c));
      }
      place(static_cast<int>(p), -1);
    }
    for (; next < clones; ++next) {
      const size_t c = byPosition[next];
      place(cloneBase_[c], static_cast<int>(c));
    }
    cloneGroupStart_.assign(clones + 1, 0);
    for (size_t c = 0; c < clones; ++c)
      cloneGroupStart_[c + 1] = cloneGroupStart_[c] + static_cast<int>(f_.results_[static_cast<size_t>(cloneBase_[c])].size());
    cloneGroup_.assign(static_cast<size_t>(cloneGroupStart_[clones]), -1);
  }

  // Rewires by base node, in plan order (a later rewire of the same operand wins, as applied).
  void indexRewires() {
    if (!plan_) return;
    std::vector<std::pair<int, int>> pairs;
    pairs.reserve(plan_->rewires.size());
    for (size_t r = 0; r < plan_->rewires.size(); ++r)
      pairs.emplace_back(f_.nodeIndex_[plan_->rewires[r].node->id()], static_cast<int>(r));
    rewiresOf_ = Lists::fromPairs(f_.nodes_.size(), pairs);
  }

  int groupOf(const Operand& o) const {
    if (o.clone >= 0) return cloneGroup_[static_cast<size_t>(cloneGroupStart_[static_cast<size_t>(o.clone)]) + o.result];
    return valueGroup_[static_cast<size_t>(o.value)];
  }
  int producerOf(const Operand& o) const {
    if (o.clone >= 0) return cloneAt_[static_cast<size_t>(o.clone)];
    const int p = f_.producer_[static_cast<size_t>(o.value)];
    return p >= 0 ? baseAt_[static_cast<size_t>(p)] : -1;
  }
  bool owns(const Operand& o) const {
    const int id = o.clone >= 0 ? f_.results_[static_cast<size_t>(cloneBase_[static_cast<size_t>(o.clone)])][o.result] : o.value;
    return f_.storage_[static_cast<size_t>(id)] == StepFacts::Storage::Owns;
  }
  static Operand fromSource(const RewriteSource& s) {
    return Operand{s.value ? static_cast<int>(s.value->id()) : -1, s.clone, s.result};
  }

  // The operands of new node i, rewires applied.
  void operandsOf(int i) {
    operands_.clear();
    const int clone = cloneOf_[static_cast<size_t>(i)];
    const auto o = static_cast<size_t>(origin_[static_cast<size_t>(i)]);
    if (clone >= 0) {
      const CloneOp& c = plan_->clones[static_cast<size_t>(clone)];
      for (size_t k = 0; k < f_.operands_[o].size(); ++k) operands_.push_back(fromSource(plan_->operands[c.first + k]));
      return;
    }
    for (int v : f_.operands_[o]) operands_.push_back(Operand{v});
    if (!plan_) return;
    for (int r : rewiresOf_[static_cast<size_t>(origin_[static_cast<size_t>(i)])]) {
      const Rewire& w = plan_->rewires[static_cast<size_t>(r)];
      operands_[w.operand] = fromSource(w.to);
    }
  }

  void addNode(int i) {
    const auto u = static_cast<size_t>(i);
    const auto o = static_cast<size_t>(origin_[u]);
    const int clone = cloneOf_[u];
    g_.nodes[u] = f_.nodes_[o];
    g_.flags[u] = static_cast<std::uint8_t>(f_.flags_[o] | (clone >= 0 ? kStepRecompute : 0));
    g_.workspace[u] = f_.workspace_[o];
    operandsOf(i);
    for (const Operand& op : operands_) {
      if (const int p = producerOf(op); p >= 0 && nodeStamp_[static_cast<size_t>(p)] != i) {
        nodeStamp_[static_cast<size_t>(p)] = i;
        g_.producers.items.push_back(p);
      }
      const int grp = groupOf(op);
      if (grp < 0) continue;
      if (owns(op)) used_[static_cast<size_t>(grp)] = 1;
      if (groupStamp_[static_cast<size_t>(grp)] == i) continue;
      groupStamp_[static_cast<size_t>(grp)] = i;
      g_.groupsRead.items.push_back(grp);
    }
    g_.producers.endRow();
    g_.groupsRead.endRow();
    g_.groupStart.push_back(static_cast<int>(g_.groupBytes.size()));
    const std::span<const int> results = f_.results_[o];
    for (size_t r = 0; r < results.size(); ++r) {
      const auto v = static_cast<size_t>(results[r]);
      int grp = -1;
      if (f_.storage_[v] == StepFacts::Storage::Owns) {
        grp = static_cast<int>(g_.groupBytes.size());
        g_.groupBytes.push_back(f_.bytes_[v]);
        g_.groupProducer.push_back(i);
        g_.groupPinned.push_back(0);
        used_.push_back(0);
        groupStamp_.push_back(-1);
      } else {
        grp = operands_.empty() ? -1 : groupOf(operands_[0]);  // a view: operand 0's storage
      }
      if (clone >= 0) cloneGroup_[static_cast<size_t>(cloneGroupStart_[static_cast<size_t>(clone)]) + r] = grp;
      else valueGroup_[v] = grp;
    }
    firstProducer_.push_back(operands_.empty() ? -1 : producerOf(operands_[0]));
  }

  void finish() {
    const size_t n = g_.nodes.size();
    g_.persistentBytes = f_.persistentBytes_;
    for (int id : f_.outputs_) {
      const int grp = valueGroup_[static_cast<size_t>(id)];
      if (grp < 0) continue;
      g_.groupPinned[static_cast<size_t>(grp)] = 1;
      if (f_.storage_[static_cast<size_t>(id)] == StepFacts::Storage::Owns) used_[static_cast<size_t>(grp)] = 1;
    }
    for (size_t i = 0; i < n; ++i)
      for (int grp = g_.groupStart[i]; grp < g_.groupStart[i + 1]; ++grp)
        if (used_[static_cast<size_t>(grp)]) g_.fresh[i] += g_.groupBytes[static_cast<size_t>(grp)];
    g_.users = g_.producers.transposed(n);
    g_.groupUsers = g_.groupsRead.transposed(g_.groupBytes.size());
    orderEdges();
  }

  // passes/schedule.h: in-place updates, collectives, reduce-scatter waits.
  void orderEdges() {
    const size_t n = g_.nodes.size();
    std::vector<std::pair<int, int>> writerPairs, touchPairs;
    std::vector<int> writtenOrder;
    std::vector<char> seen(f_.numParams_, 0);
    for (size_t i = 0; i < n; ++i) {
      const auto o = static_cast<size_t>(origin_[i]);
      for (int p : f_.paramsWritten_[o]) {
        if (!seen[static_cast<size_t>(p)]) writtenOrder.push_back(p);
        seen[static_cast<size_t>(p)] = 1;
        writerPairs.emplace_back(p, static_cast<int>(i));
      }
      for (int p : f_.paramsTouched_[o]) touchPairs.emplace_back(p, static_cast<int>(i));
    }
    if (!writtenOrder.empty()) {
      const Lists writers = Lists::fromPairs(f_.numParams_, writerPairs);
      const Lists touching = Lists::fromPairs(f_.numParams_, touchPairs);
      for (int p : writtenOrder)
        for (int w : writers[static_cast<size_t>(p)])
          for (int t : touching[static_cast<size_t>(p)])
            if (t != w) g_.orderEdges.emplace_back(std::min(t, w), std::max(t, w));
    }
    // Collectives in seq order; when clones issue collectives (gathers made again for
    // recompute, whose seq is their original's), in the new program order, as applyRewrite
    // numbers them (the originals' seq is their program order there: passes/shard_params.h).
    std::vector<std::pair<std::int64_t, int>> collectives;
    bool clonedCollective = false;
    for (size_t i = 0; i < n; ++i)
      clonedCollective = clonedCollective || (cloneOf_[i] >= 0 && g_.has(static_cast<int>(i), kStepIssuesCollective));
    for (size_t i = 0; i < n; ++i)
      if (g_.has(static_cast<int>(i), kStepIssuesCollective))
        collectives.emplace_back(clonedCollective ? 0 : f_.seq_[static_cast<size_t>(origin_[i])], static_cast<int>(i));
    std::sort(collectives.begin(), collectives.end());
    for (size_t k = 1; k < collectives.size(); ++k)
      g_.orderEdges.emplace_back(collectives[k - 1].second, collectives[k].second);
    int lastIssued = -1;
    for (size_t i = 0; i < n; ++i) {
      if (g_.has(static_cast<int>(i), kStepIssuesCollective)) lastIssued = static_cast<int>(i);
      if (!g_.has(static_cast<int>(i), kStepReduceScatterWait) || lastIssued < 0) continue;
      if (lastIssued == firstProducer_[i]) continue;
      g_.orderEdges.emplace_back(lastIssued, static_cast<int>(i));
    }
  }

  const StepFacts& f_;
  const RewritePlan* plan_;
  StepGraph g_;
  std::vector<int> origin_;   // per new node: the facts' node it is (or copies)
  std::vector<int> cloneOf_;  // per new node: its clone index, or -1
  std::vector<int> baseAt_, cloneAt_;  // new index of each facts node and each clone
  std::vector<int> valueGroup_;        // by value id (facts' graph): group in the new graph
  std::vector<int> cloneBase_;                     // per clone: the facts' node it copies
  std::vector<int> cloneGroupStart_, cloneGroup_;  // clone results' groups
  Lists rewiresOf_;
  std::vector<Operand> operands_;
  std::vector<int> nodeStamp_, groupStamp_;
  std::vector<char> used_;  // per group: its owning value is read or a graph output
  std::vector<int> firstProducer_;
};

StepGraph buildStepGraph(const StepFacts& facts, const RewritePlan* plan) {
  if (plan && plan->clones.empty() && plan->rewires.empty()) plan = nullptr;
  return StepGraphBuilder(facts, plan).build();
}

}  // namespace gradc::passes
