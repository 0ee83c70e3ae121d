#include "passes/shard_params.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/device_mesh.h"
#include "ir/parameter_init.h"
#include "ir/shard_layout.h"
#include "passes/build_node.h"
#include "passes/collective_seq.h"

namespace gradc::passes {

namespace {

constexpr std::string_view kPass = "parameter sharding";
constexpr std::string_view kSpecName = "shard_params";

Expected<ir::Node*> emitAt(ir::Graph& g, ir::Node* before, std::string_view op, std::vector<ir::Value*> operands,
                           ir::AttrMap attrs, ir::Phase phase) {
  return buildNode(g, kPass, op, std::move(operands), std::move(attrs), phase, std::string(kSpecName), before);
}

// One parameter group: a gradient bucket's sharded update and the all-gather after it.
struct Group {
  ir::Node* update = nullptr;
  ir::Node* gather = nullptr;  // all_gather_params
  std::vector<ir::Value*> params;
  std::int64_t bucket = 0;
  std::int64_t shard = 0;
  ir::Value* shardParam = nullptr;
  bool kept = false;
  // The parameters' shapes as all_gather_wait's part_ranks and part_shapes.
  std::vector<std::int64_t> partRanks, partShapes;
};

// One reading of a bucket parameter: the node, which operand, which part of the bucket.
struct Read {
  size_t index = 0;  // the node's program position
  ir::Node* node = nullptr;
  unsigned operand = 0;
  size_t part = 0;
};

// The readers of one group between two gathers, and the gather made for them.
struct Segment {
  size_t group = 0;
  std::vector<Read> reads;
  ir::Node* wait = nullptr;
  size_t firstIndex() const { return reads.front().index; }
};

bool isForward(const ir::Node& n) { return n.phase() == ir::Phase::fwd; }

// The rank's shard of the group's parameters, as a parameter named after the bucket.
Expected<ir::Value*> addShardParam(ir::Graph& g, const Group& group, const DataParallelOptions& o) {
  const std::string name = "param.bucket" + std::to_string(group.bucket);
  if (g.findNamed(name)) return Error{"parameter sharding: the name '" + name + "' is already taken"};
  std::string of;
  std::vector<ir::ParameterInit> inits;
  for (const ir::Value* p : group.params) {
    of += (of.empty() ? "" : ",") + p->name();
    Expected<ir::ParameterInit> init = ir::parameterInitOf(p->attrs(), p->name());
    if (!init) return init.error();
    inits.push_back(*init);
  }
  return g.addParam(name, ir::TensorType{group.params[0]->type().dtype, {group.shard}},
                    {{"init", std::string("shard")},
                     {"shard_init", ir::encodeParameterInits(inits)},
                     {"of", "parameter group " + std::to_string(group.bucket) + ".shard"},
                     {"shard_of", of},
                     {"shard_prefix", std::string()},
                     {"shard_offset", o.rank * group.shard},
                     {"shard_world", static_cast<std::int64_t>(o.world)},
                     {"shard_part_ranks", group.partRanks},
                     {"shard_part_shapes", group.partShapes}});
}

// Steps 2 and 3 of the header: every group's readers (but its update and stage 2 all-gather)
// cut into segments, each gathering the group's shardParam before its first reader, and read
// from that gather.
Status gatherForReaders(ir::Graph& g, std::vector<Group>& groups, const DataParallelOptions& o) {
  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < g.numNodes(); ++i) position[g.nodes()[i].get()] = i;

  // Every read of a group's parameters but its update's and all-gather's, in program order.
  std::vector<std::vector<Read>> reads(groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    for (size_t part = 0; part < groups[k].params.size(); ++part) {
      const ir::Value* p = groups[k].params[part];
      if (!p) continue;  // a part the graph does not read (an evaluation without it)
      if (p->isGraphOutput())
        return Error{"parameter sharding: the parameter '" + p->name() + "' is an output of the step; under "
                     "--shard 3 no rank holds it whole"};
      for (const ir::Use& u : p->uses())
        if (u.user != groups[k].update && u.user != groups[k].gather)
          reads[k].push_back(Read{position.at(u.user), u.user, u.operandIndex, part});
    }
    std::sort(reads[k].begin(), reads[k].end(), [](const Read& a, const Read& b) {
      return a.index != b.index ? a.index < b.index : a.operand < b.operand;
    });
  }

  // Kept groups: the last `keepGathered` the forward gathers (by their first forward read; a
  // group the forward does not read has nothing to keep, as forwardGatheredGroups counts).
  std::vector<size_t> forwardOrder;
  std::vector<size_t> firstForward(groups.size(), 0);
  for (size_t k = 0; k < groups.size(); ++k) {
    auto forwardRead = std::find_if(reads[k].begin(), reads[k].end(), [](const Read& r) { return isForward(*r.node); });
    if (forwardRead == reads[k].end()) continue;
    firstForward[k] = forwardRead->index;
    forwardOrder.push_back(k);
  }
  std::stable_sort(forwardOrder.begin(), forwardOrder.end(),
                   [&](size_t a, size_t b) { return firstForward[a] < firstForward[b]; });
  const size_t keep = o.keepGathered == kKeepGatheredAuto ? 0
                     : o.keepGathered < 0                ? forwardOrder.size()
                                         : std::min(forwardOrder.size(), static_cast<size_t>(o.keepGathered));
  for (size_t i = forwardOrder.size() - keep; i < forwardOrder.size(); ++i) groups[forwardOrder[i]].kept = true;

  // Segments: a kept group's reads are one; otherwise a new one where the reads pass between the
  // forward and the rest.
  std::vector<Segment> segments;
  for (size_t k = 0; k < groups.size(); ++k)
    for (size_t i = 0; i < reads[k].size(); ++i) {
      const Read& r = reads[k][i];
      const bool fresh = i == 0 || (!groups[k].kept && isForward(*r.node) != isForward(*reads[k][i - 1].node));
      if (fresh) segments.push_back(Segment{k, {}, nullptr});
      segments.back().reads.push_back(r);
    }
  std::stable_sort(segments.begin(), segments.end(),
                   [](const Segment& a, const Segment& b) { return a.firstIndex() < b.firstIndex(); });

  // The gathers: each wait right before its segment's first reader; its start there too, or one
  // segment ahead (prefetch).
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& seg = segments[i];
    const Group& group = groups[seg.group];
    ir::Node* firstReader = seg.reads.front().node;
    ir::Node* startBefore = o.prefetch && i > 0 ? segments[i - 1].reads.front().node : firstReader;
    const ir::AttrMap attrs{{"world", static_cast<std::int64_t>(o.world)},
                            {"rank", static_cast<std::int64_t>(o.rank)},
                            {"seq", std::int64_t{0}},
                            {"bucket", group.bucket},
                            {"group", std::string(ir::kDataParallelAxis)}};
    // Inside the forward a gather takes the forward's phase, so that the forward stays one run
    // for the recompute planner (passes/remat.h); its results are kept as any collective's.
    auto phaseAt = [](const ir::Node* n) { return isForward(*n) ? ir::Phase::fwd : ir::Phase::comm; };
    Expected<ir::Node*> start = emitAt(g, startBefore, "all_gather_start", {group.shardParam}, attrs, phaseAt(startBefore));
    if (!start) return start.error();
    ir::AttrMap waitAttrs = attrs;
    waitAttrs["part_ranks"] = group.partRanks;
    waitAttrs["part_shapes"] = group.partShapes;
    if (group.kept) waitAttrs["kept"] = true;
    Expected<ir::Node*> wait =
        emitAt(g, firstReader, "all_gather_wait", {(*start)->result(0)}, waitAttrs, phaseAt(firstReader));
    if (!wait) return wait.error();
    seg.wait = *wait;
  }
  for (const Segment& seg : segments)
    for (const Read& r : seg.reads) r.node->setOperand(r.operand, seg.wait->result(r.part));
  return {};
}

// The replicated parameters, read by nothing now, leave the graph; collectives numbered again.
Status dropReplicated(ir::Graph& g, const std::vector<Group>& groups) {
  std::unordered_set<const ir::Value*> replicated;
  for (const Group& group : groups)
    for (const ir::Value* p : group.params) {
      if (!p) continue;
      if (p->hasUses())
        return internalError(kPass, "the parameter '" + p->name() + "' is still read after its group was sharded");
      replicated.insert(p);
    }
  g.eraseParamsIf([&](const ir::Value& p) { return replicated.count(&p) > 0; });
  renumberCollectives(g);
  return {};
}

}  // namespace

Status shardParameters(ir::Graph& g, const DataParallelOptions& o) {
  // The groups, from the sharded updates stage 2 made.
  std::vector<Group> groups;
  for (const auto& n : g.nodes()) {
    if (n->op().role != ir::OpRole::ShardedOptimizerUpdate) continue;
    Group group;
    group.update = n.get();
    const auto parts = static_cast<size_t>(*ir::getInt(n->attrs(), "parts"));
    for (size_t i = 0; i < parts; ++i) {
      ir::Value* p = n->operand(i);
      if (p->kind() != ir::ValueKind::Param)
        return internalError(kPass, "a sharded update's operand " + std::to_string(i) + " is not a parameter");
      group.params.push_back(p);
    }
    group.shard = *ir::getInt(n->attrs(), "shard");
    for (const ir::Use& u : n->result(0)->uses())
      if (u.user->op().collective == ir::Collective::AllGatherParams) group.gather = u.user;
    if (!group.gather || !ir::getBool(n->attrs(), "grad_shard").value_or(false))
      return internalError(kPass, "expects stage 2's sharded updates, each followed by all_gather_params");
    group.bucket = ir::getInt(group.gather->attrs(), "bucket").value_or(static_cast<std::int64_t>(groups.size()));
    for (const ir::Value* p : group.params) {
      group.partRanks.push_back(p->type().rank());
      group.partShapes.insert(group.partShapes.end(), p->type().shape.begin(), p->type().shape.end());
    }
    groups.push_back(std::move(group));
  }
  if (groups.empty()) return {};
  g.attrs()[std::string(kPrefetchGathersAttr)] = o.prefetch;
  for (Group& group : groups) {
    Expected<ir::Value*> shard = addShardParam(g, group, o);
    if (!shard) return shard.error();
    group.shardParam = *shard;
  }
  // The optimizer state's shards name the same parameters, which leave the graph: they state
  // their shapes too.
  for (const Group& group : groups) {
    const ir::AttrMap& a = group.shardParam->attrs();
    for (const auto& p : g.params())
      if (p.get() != group.shardParam && ir::getString(p->attrs(), "shard_of") == ir::getString(a, "shard_of")) {
        p->attrs()["shard_part_ranks"] = group.partRanks;
        p->attrs()["shard_part_shapes"] = group.partShapes;
      }
  }
  if (Status s = gatherForReaders(g, groups, o); !s) return s;

  // The updates take the shard and update it in place; the all-gathers of stage 2 go.
  std::unordered_set<const ir::Node*> dead;
  for (Group& group : groups) {
    ir::Node& u = *group.update;
    const size_t parts = group.params.size();
    std::vector<ir::Value*> operands{group.shardParam};
    for (size_t i = parts; i < u.numOperands(); ++i) operands.push_back(u.operand(i));
    ir::AttrMap attrs = u.attrs();
    attrs["param_shard"] = true;
    std::vector<std::int64_t> numels;
    for (const ir::Value* p : group.params) numels.push_back(p->type().numel());
    attrs["part_numels"] = std::move(numels);
    Expected<ir::Node*> update = emitAt(g, &u, u.opName(), std::move(operands), std::move(attrs), u.phase());
    if (!update) return update.error();
    dead.insert(&u);
    dead.insert(group.gather);
  }
  g.eraseIf([&](const ir::Node& n) { return dead.count(&n) > 0; });
  return dropReplicated(g, groups);
}

Status gatherShardsForEvaluation(ir::Graph& eval, const ir::Graph& step) {
  DataParallelOptions o;
  o.keepGathered = 0;
  o.prefetch = ir::getBool(step.attrs(), kPrefetchGathersAttr).value_or(true);
  std::vector<Group> groups;
  for (const auto& shard : step.params()) {
    const ir::AttrMap& a = shard->attrs();
    if (!ir::getString(a, "shard_init")) continue;  // optimizer-state shards have none
    constexpr std::string_view kPrefix = "param.bucket";
    const std::optional<std::string> of = ir::getString(a, "shard_of");
    const std::optional<std::vector<std::int64_t>> ranks = ir::getIntList(a, "shard_part_ranks");
    const std::optional<std::vector<std::int64_t>> shapes = ir::getIntList(a, "shard_part_shapes");
    const std::optional<std::int64_t> world = ir::getInt(a, "shard_world"), offset = ir::getInt(a, "shard_offset");
    if (shard->name().rfind(kPrefix, 0) != 0 || !of || !ranks || !shapes || !world || !offset)
      return internalError(kPass, "the parameter shard '" + shard->name() + "' does not state its bucket and parts");
    Group group;
    group.shard = shard->type().numel();
    group.bucket = std::stoll(shard->name().substr(kPrefix.size()));
    group.partRanks = *ranks;
    group.partShapes = *shapes;
    o.world = static_cast<int>(*world);
    o.rank = static_cast<int>(*offset / std::max<std::int64_t>(group.shard, 1));
    for (const std::string& name : ir::shardedNames(*of)) {
      ir::Value* p = eval.findNamed(name);
      if (p && p->kind() != ir::ValueKind::Param)
        return internalError(kPass, "'" + p->name() + "' is not a parameter of the evaluation step");
      group.params.push_back(p);
    }
    if (group.params.size() != group.partRanks.size())
      return internalError(kPass, "the parameter shard '" + shard->name() + "' names " +
                                      std::to_string(group.params.size()) + " parameters for " +
                                      std::to_string(group.partRanks.size()) + " parts");
    if (eval.findNamed(shard->name()))
      return Error{"parameter sharding: the name '" + shard->name() + "' is already taken"};
    group.shardParam = eval.addParam(shard->name(), shard->type(), a);
    groups.push_back(std::move(group));
  }
  if (groups.empty()) return {};
  eval.attrs()[std::string(kPrefetchGathersAttr)] = o.prefetch;
  if (Status s = gatherForReaders(eval, groups, o); !s) return s;
  return dropReplicated(eval, groups);
}

namespace {

// A stage 3 step's gathers, by their waits: the buckets the forward gathers, those of them
// kept, and the gathers made again for recompute.
struct GatherCounts {
  std::set<std::int64_t> forward, kept;
  int recompute = 0;
};
GatherCounts countGathers(const ir::Graph& g) {
  GatherCounts c;
  for (const auto& n : g.nodes()) {
    if (n->op().collective != ir::Collective::AllGatherWait) continue;
    const std::int64_t bucket = ir::getInt(n->attrs(), "bucket").value_or(-1);
    if (n->phase() == ir::Phase::recompute) ++c.recompute;
    if (n->phase() != ir::Phase::fwd) continue;
    c.forward.insert(bucket);
    if (ir::getBool(n->attrs(), "kept").value_or(false)) c.kept.insert(bucket);
  }
  return c;
}

}  // namespace

int forwardGatheredGroups(const ir::Graph& g) { return static_cast<int>(countGathers(g).forward.size()); }

std::string describeGathers(const ir::Graph& g) {
  const auto [forward, kept, recompute] = countGathers(g);
  const size_t again = forward.size() - kept.size();
  std::string out = kept.empty()                   ? "every bucket gathered again for the backward"
                    : kept.size() == forward.size() ? "every bucket kept from the forward"
                                                    : "the last " + std::to_string(kept.size()) + " of " +
                                                          std::to_string(forward.size()) +
                                                          " buckets kept from the forward, " + std::to_string(again) +
                                                          " gathered again for the backward";
  if (recompute > 0)
    out += ", " + std::to_string(recompute) + " gather" + (recompute == 1 ? "" : "s") + " again for recompute";
  return out;
}

}  // namespace gradc::passes
