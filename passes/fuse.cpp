#include "passes/fuse.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/fused_body.h"
#include "passes/memory/storage.h"

namespace gradc::passes {
namespace {

// True unless `v` is certainly contiguous: graph inputs, parameters and results of non-view ops
// are; views may not be, except the parts of a flat bucket and reshapes of contiguous memory.
bool mayBeStrided(const ir::Value* v) {
  while (v->kind() == ir::ValueKind::Result && v->producer()->op().view) {
    switch (v->producer()->op().viewLayout) {
      case ir::ViewLayout::BucketParts: return false;
      case ir::ViewLayout::Reshape: v = v->producer()->operand(0); break;
      default: return true;
    }
  }
  return false;
}

// True when the node's kernel creates memory: a non-view result (views and result-less updates
// create none).
bool allocates(const ir::Node& n) { return n.numResults() > 0 && !n.op().view; }

bool isCandidate(const ir::Node& n) {
  if (!ir::isFusableOp(n.op()) || n.numResults() != 1) return false;
  const ir::DType t = n.result()->type().dtype;
  if (t != ir::DType::f32 && t != ir::DType::f64) return false;
  for (const ir::Value* v : n.operands())
    if (v->type().dtype != t) return false;
  return true;
}

struct Region {
  std::vector<ir::Node*> members;  // program order
  ir::Phase phase;
  ir::TensorType space;
  bool merged = false;  // absorbed into another region
};

// "blocks.0.mlp" for members named "blocks.0.mlp.fc1" and "blocks.0.mlp.act"; the last
// member's name when they share no leading component.
std::string commonSpecName(const std::vector<ir::Node*>& members) {
  std::string prefix = members.front()->specName();
  for (const ir::Node* m : members) {
    const std::string& name = m->specName();
    size_t keep = 0, i = 0;
    while (i < prefix.size() && i < name.size() && prefix[i] == name[i]) {
      ++i;
      if ((i == prefix.size() || prefix[i] == '.') && (i == name.size() || name[i] == '.')) keep = i;
    }
    prefix.resize(keep);
  }
  return prefix.empty() ? members.back()->specName() : prefix;
}

class Fuser {
 public:
  explicit Fuser(ir::Graph& graph)
      : graph_(graph),
        storage_(analyzeStorage(graph)),
        position_(graph.nodeIdBound(), 0),
        regionOf_(graph.nodeIdBound(), -1) {
    for (size_t i = 0; i < graph.numNodes(); ++i) position_[graph.nodes()[i]->id()] = i;
  }

  Expected<FuseStats> run() {
    for (const auto& owned : graph_.nodes()) place(owned.get());
    FuseStats stats;
    std::unordered_set<const ir::Node*> replaced;
    for (Region& r : regions_) {
      if (r.merged || r.members.size() < 2) continue;
      Expected<bool> made = build(r);
      if (!made) return made.error();
      if (!*made) continue;
      ++stats.regions;
      stats.fusedNodes += static_cast<int>(r.members.size());
      for (ir::Node* m : r.members) replaced.insert(m);
    }
    graph_.setInsertionPoint(nullptr);
    graph_.eraseIf([&](const ir::Node& n) { return replaced.count(&n) > 0; });
    // Ops with a one-pass variant (the op table's optional Bool attribute `fused`: adamw_step)
    // take it when they update f32 or f64 tensors read contiguously. Updates built from one
    // attribute map (an optimizer's) come one after another: each takes the map the previous
    // one got when their attributes were the same, so they still share one.
    ir::AttrMap before, after;
    for (const auto& n : graph_.nodes()) {
      const ir::AttrSpec* fusedAttr = ir::findAttrSpec(n->op(), "fused");
      if (!fusedAttr || fusedAttr->kind != ir::AttrKind::Bool || ir::getBool(n->attrs(), "fused").value_or(false)) continue;
      const ir::DType t = n->operand(0)->type().dtype;
      bool onePass = t == ir::DType::f32 || t == ir::DType::f64;
      for (const ir::Value* v : n->operands()) onePass = onePass && !mayBeStrided(v);
      if (!onePass) continue;
      if (n->attrs() != before || after.empty()) {
        before = n->attrs();
        after = before;
        after["fused"] = true;
      }
      n->attrs() = after;
      ++stats.onePassUpdates;
    }
    return stats;
  }

 private:
  // -1 for nodes in no region, fused nodes made since included.
  int regionOf(const ir::Node* n) const { return n->id() < regionOf_.size() ? regionOf_[n->id()] : -1; }
  size_t positionOf(const ir::Node* n) const { return position_[n->id()]; }

  // No node outside region r, other than n, uses a value of r before n.
  bool canJoin(const Region& r, int id, const ir::Node* n) const {
    const size_t at = positionOf(n);
    for (const ir::Node* m : r.members)
      for (const ir::Use& u : m->result()->uses())
        if (u.user != n && regionOf(u.user) != id && positionOf(u.user) < at) return false;
    return true;
  }

  // The values region r (index id) reads from outside it.
  std::vector<const ir::Value*> inputsOf(const Region& r, int id) const {
    std::vector<const ir::Value*> inputs;
    for (const ir::Node* m : r.members)
      for (const ir::Value* v : m->operands())
        if ((v->kind() != ir::ValueKind::Result || regionOf(v->producer()) != id) &&
            std::find(inputs.begin(), inputs.end(), v) == inputs.end())
          inputs.push_back(v);
    return inputs;
  }

  // Where region r's input is last read before n, counting r's own last member and each other
  // reader at its region's place (where the region's fused node will be, or later); nullopt
  // when the value stays alive at n anyway (a parameter or input, a graph output, a reader at
  // or after n). Positions only move later as regions grow, so this errs towards "read earlier".
  std::optional<size_t> lastReadBefore(const ir::Value* input, const Region& r, int id, const ir::Node* n) const {
    if (input->kind() != ir::ValueKind::Result || input->isGraphOutput()) return std::nullopt;
    size_t last = positionOf(r.members.back());
    for (const ir::Use& u : input->uses()) {
      if (u.user == n) continue;
      const int region = regionOf(u.user);
      if (region == id) continue;
      const size_t at = region >= 0 ? positionOf(regions_[static_cast<size_t>(region)].members.back()) : positionOf(u.user);
      if (at >= positionOf(n)) return std::nullopt;
      last = std::max(last, at);
    }
    return last;
  }

  void place(ir::Node* n) {
    if (!isCandidate(*n)) return;
    std::vector<int> joined;
    size_t steps = 1;
    for (const ir::Value* v : n->operands()) {
      if (v->kind() != ir::ValueKind::Result) continue;
      const int id = regionOf(v->producer());
      if (id < 0 || std::find(joined.begin(), joined.end(), id) != joined.end()) continue;
      const Region& r = regions_[static_cast<size_t>(id)];
      if (r.phase != n->phase() || r.space != n->result()->type()) continue;
      if (steps + r.members.size() > static_cast<size_t>(kMaxFusedSteps) || !canJoin(r, id, n)) continue;
      steps += r.members.size();
      joined.push_back(id);
    }
    // The fused node reads a joined region's inputs at n's place, so each input stays alive
    // from where it was last read to n: nothing that allocates may run in that stretch (other
    // than the joined regions' own members), or the fusion would keep it alive across an
    // allocation (an accumulation chain add(add(g1, g2), g3) with g3 computed in between would
    // keep every g alive at once). Dropping a region can expose another one's members as
    // allocations in between: repeat until the set is stable (it only shrinks).
    for (bool dropped = true; dropped;) {
      const std::vector<int> candidates = joined;
      dropped = std::erase_if(joined, [&](int id) {
        const Region& r = regions_[static_cast<size_t>(id)];
        for (const ir::Value* input : inputsOf(r, id)) {
          const std::optional<size_t> from = lastReadBefore(input, r, id, n);
          if (!from) continue;  // alive at n anyway
          for (size_t p = *from + 1; p < positionOf(n); ++p) {
            const ir::Node* between = graph_.nodes()[p].get();
            const int other = regionOf(between);
            if (other >= 0 && std::find(candidates.begin(), candidates.end(), other) != candidates.end()) continue;
            if (allocates(*between)) return true;
          }
        }
        return false;
      }) > 0;
    }
    if (joined.empty()) {
      regions_.push_back(Region{{n}, n->phase(), n->result()->type()});
      regionOf_[n->id()] = static_cast<int>(regions_.size() - 1);
      return;
    }
    const int into = joined.front();
    Region& target = regions_[static_cast<size_t>(into)];
    for (size_t k = 1; k < joined.size(); ++k) {
      Region& other = regions_[static_cast<size_t>(joined[k])];
      for (ir::Node* m : other.members) {
        target.members.push_back(m);
        regionOf_[m->id()] = into;
      }
      other.members.clear();
      other.merged = true;
    }
    target.members.push_back(n);
    regionOf_[n->id()] = into;
    std::sort(target.members.begin(), target.members.end(),
              [&](const ir::Node* a, const ir::Node* b) { return positionOf(a) < positionOf(b); });
  }

  // Replaces the region by one fused node; false (graph unchanged) when it reads too many values
  // or nothing uses it.
  Expected<bool> build(const Region& r) {
    const int id = regionOf(r.members.front());
    std::unordered_map<const ir::Node*, int> step;
    std::unordered_map<ir::Value*, int> inputIndex;
    std::vector<ir::Value*> inputs;
    ir::FusedBody body;
    for (ir::Node* m : r.members) {
      ir::FusedStep s{&m->op(), {}, m->attrs(), m->specName()};
      for (ir::Value* v : m->operands()) {
        if (v->kind() == ir::ValueKind::Result && regionOf(v->producer()) == id) {
          s.operands.push_back({false, step.at(v->producer())});
          continue;
        }
        auto [it, fresh] = inputIndex.emplace(v, static_cast<int>(inputs.size()));
        if (fresh) inputs.push_back(v);
        s.operands.push_back({true, it->second});
      }
      step.emplace(m, static_cast<int>(body.steps.size()));
      body.steps.push_back(std::move(s));
    }
    if (inputs.size() > static_cast<size_t>(kMaxFusedOperands)) return false;
    std::vector<ir::Node*> outputs;
    for (ir::Node* m : r.members) {
      const ir::Value* v = m->result();
      bool outside = v->isGraphOutput();
      for (const ir::Use& u : v->uses()) outside = outside || regionOf(u.user) != id;
      if (!outside) continue;
      body.outputs.push_back(step.at(m));
      outputs.push_back(m);
    }
    if (outputs.empty()) return false;  // dead code (dce removes it); nothing to fuse
    // Strided inputs (views) are read in place: the node names every input's strides.
    ir::AttrMap attrs{{"body", ir::printFusedBody(body)}};
    std::vector<std::int64_t> strides;
    bool strided = false;
    for (const ir::Value* v : inputs) {
      // Only views can be strided; they predate this pass (a fused node's results, which the
      // storage model has not seen, are contiguous).
      const bool view = v->kind() == ir::ValueKind::Result && v->producer()->op().view;
      const std::vector<std::int64_t> own = view ? storage_.strides(v) : contiguousStrides(v->type().shape);
      strides.insert(strides.end(), own.begin(), own.end());
      strided = strided || (view && !storage_.contiguous(v));
    }
    if (strided) attrs["strides"] = std::move(strides);
    graph_.setInsertionPoint(r.members.back());
    Expected<ir::Node*> fused = graph_.create("fused", inputs, std::move(attrs), r.phase, commonSpecName(r.members));
    if (!fused) return Error{"internal: fusing " + r.members.front()->specName() + ": " + fused.error().message, ErrorKind::Internal};
    for (size_t k = 0; k < outputs.size(); ++k) graph_.replaceAllUsesWith(outputs[k]->result(), (*fused)->result(k));
    return true;
  }

  ir::Graph& graph_;
  const StorageModel storage_;    // strides of the values fused nodes read (views among them)
  std::vector<size_t> position_;  // by node id: program position of the nodes given
  std::vector<int> regionOf_;     // by node id: region index, -1 for none
  std::vector<Region> regions_;
};

}  // namespace

Expected<FuseStats> fuseElementwise(ir::Graph& graph) { return Fuser(graph).run(); }

Expected<bool> FuseElementwise::run(ir::Graph& graph) {
  Expected<FuseStats> stats = fuseElementwise(graph);
  if (!stats) return stats.error();
  return stats->regions > 0 || stats->onePassUpdates > 0;
}

}  // namespace gradc::passes
