#include "passes/shard_state.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/device_mesh.h"
#include "ir/shard_layout.h"
#include "passes/build_node.h"
#include "passes/shard_params.h"

namespace gradc::passes {

namespace {

constexpr std::string_view kSpecName = "shard_state";

Expected<ir::Node*> emitAt(ir::Graph& g, ir::Node* before, std::string_view op, std::vector<ir::Value*> operands,
                           ir::AttrMap attrs, ir::Phase phase) {
  return buildNode(g, "optimizer-state sharding", op, std::move(operands), std::move(attrs), phase,
                   std::string(kSpecName), before);
}

ir::Node* nextNode(const ir::Graph& g, const ir::Node* n) {
  const size_t i = *g.indexOf(n) + 1;
  return i < g.numNodes() ? g.nodes()[i].get() : nullptr;
}

bool isUpdate(const ir::Node& n) { return n.op().role == ir::OpRole::OptimizerUpdate; }

// One gradient bucket and what reads its reduced parts.
struct Bucket {
  ir::Node* start = nullptr;
  ir::Node* wait = nullptr;
  std::int64_t number = 0;
  std::vector<ir::Node*> updates;  // per part, in bucket order
  std::vector<ir::Value*> params;
  std::int64_t total = 0;  // elements
};

// The replicated state's name prefix ("opt.adam_m."): its name before its parameter's, as the
// optimizer pass named it.
Expected<std::string> statePrefix(const ir::Value& state, const ir::Value& param) {
  const std::string& name = state.name();
  if (name.size() <= param.name().size() || name.compare(name.size() - param.name().size(), std::string::npos,
                                                         param.name()) != 0)
    return Error{"optimizer-state sharding: the state '" + name + "' is not named after its parameter '" +
                 param.name() + "'"};
  return name.substr(0, name.size() - param.name().size());
}

std::string joinNames(const std::vector<ir::Value*>& params) {
  std::string out;
  for (const ir::Value* p : params) out += (out.empty() ? "" : ",") + p->name();
  return out;
}

}  // namespace

Status shardOptimizerState(ir::Graph& g, const DataParallelOptions& o) {
  const ZeroStage stage = o.shardStage();
  if (stage == ZeroStage::Replicated || o.world == 1) return {};
  const bool gradientShards = stage >= ZeroStage::Gradients;  // stage 3 is stage 2, then the parameters (passes/shard_params.h)
  const std::int64_t world = o.world, rank = o.rank;

  // The buckets, in seq order, and the update reading each part.
  std::unordered_map<const ir::Value*, ir::Node*> updateOf;
  for (const auto& n : g.nodes())
    if (isUpdate(*n)) updateOf[n->operand(1)] = n.get();
  std::vector<Bucket> buckets;
  std::int64_t maxSeq = 0;
  for (const auto& n : g.nodes()) {
    if (n->op().issuesCollective) maxSeq = std::max(maxSeq, ir::getInt(n->attrs(), "seq").value_or(0));
    if (n->op().collective != ir::Collective::AllReduceStart) continue;
    const std::int64_t number = ir::getInt(n->attrs(), "bucket").value_or(-1);
    if (number < 0) continue;  // the loss
    Bucket b{n.get(), nullptr, number, {}, {}, 0};
    for (const ir::Use& u : n->result(0)->uses())
      if (u.user->op().collective == ir::Collective::AllReduceWait) b.wait = u.user;
    if (!b.wait) return Error{"optimizer-state sharding: bucket " + std::to_string(number) + " is never waited for"};
    for (size_t r = 0; r < b.wait->numResults(); ++r) {
      auto it = updateOf.find(b.wait->result(r));
      if (it == updateOf.end())
        return Error{"optimizer-state sharding: a gradient of bucket " + std::to_string(number) +
                     " feeds no optimizer update (run the optimizer pass first)"};
      b.updates.push_back(it->second);
      b.params.push_back(it->second->operand(0));
      b.total += b.wait->result(r)->type().numel();
    }
    buckets.push_back(std::move(b));
  }
  if (buckets.empty()) return {};
  // One sharded update per bucket takes its hyperparameters and per-step scalars from the first
  // update: every update of the bucket must agree on them, except weight decay, which a decay
  // group may leave off (0) for some parameters: those the sharded update lists in
  // no_decay_parts, and the bucket's decay is that of the others.
  // An update's operands other than its parameter, gradient and state (OpInfo::stateBegin/End):
  // the learning rate, step and gradient scale, which one sharded update shares.
  auto sharedScalars = [](const ir::Node& update) {
    std::vector<size_t> at;
    for (size_t i = 2; i < update.numOperands(); ++i)
      if (static_cast<int>(i) < update.op().stateBegin || static_cast<int>(i) >= update.op().stateEnd) at.push_back(i);
    return at;
  };
  auto withoutDecay = [](const ir::AttrMap& attrs) {
    ir::AttrMap rest = attrs;
    rest.erase("weight_decay");
    return rest;
  };
  std::vector<double> bucketDecay(buckets.size(), 0.0);
  for (size_t k = 0; k < buckets.size(); ++k) {
    const Bucket& b = buckets[k];
    const ir::Node& first = *b.updates[0];
    if (first.op().shardedForm.empty())
      return internalError("optimizer-state sharding", "the update op '" + std::string(first.opName()) + "' has no sharded form");
    const ir::AttrMap firstRest = withoutDecay(first.attrs());
    for (const ir::Node* u : b.updates) {
      const double decay = ir::getFloat(u->attrs(), "weight_decay").value_or(0.0);
      bool same = &u->op() == &first.op() && withoutDecay(u->attrs()) == firstRest &&
                  u->numOperands() == first.numOperands() &&
                  (decay == 0.0 || bucketDecay[k] == 0.0 || decay == bucketDecay[k]);
      if (decay != 0.0) bucketDecay[k] = decay;
      for (size_t i : sharedScalars(first)) same = same && u->operand(i) == first.operand(i);
      if (!same)
        return Error{"optimizer-state sharding: the updates of bucket " + std::to_string(b.number) +
                     " differ in op, hyperparameters or step scalars; one sharded update cannot apply them"};
    }
  }

  // Gradient-norm clipping: the global_norm over the reduced gradients, when there is one.
  ir::Node* norm = nullptr;
  for (const auto& n : g.nodes())
    if (n->op().role == ir::OpRole::GradientNorm) norm = n.get();

  // 2. Stage 2: reduce-scatters in place of the buckets' all-reduces.
  std::vector<ir::Value*> gradSource(buckets.size());  // the reduced shard (stage 2)
  if (gradientShards) {
    std::vector<ir::Node*> starts;
    for (Bucket& b : buckets) {
      const ir::AttrMap attrs{{"world", world}, {"rank", rank}, {"seq", *ir::getInt(b.start->attrs(), "seq")},
                              {"bucket", b.number}, {"group", std::string(ir::kDataParallelAxis)}};
      std::vector<ir::Value*> grads(b.start->operands().begin(), b.start->operands().end());
      auto start = emitAt(g, b.start, "reduce_scatter_start", grads, attrs, ir::Phase::comm);
      if (!start) return start.error();
      starts.push_back(*start);
    }
    for (size_t k = 0; k < buckets.size(); ++k) {
      // A bucket over the size cap (one large gradient) is waited for at once: in flight beyond
      // the bucket being filled is never more than one cap's worth.
      std::int64_t gradientBytes = 0;
      for (const ir::Value* v : starts[k]->operands()) gradientBytes += v->type().bytes();
      const bool overlap = k + 1 < buckets.size() && gradientBytes <= o.bucketBytes;
      ir::Node* at = overlap ? nextNode(g, starts[k + 1]) : k + 1 < buckets.size() ? nextNode(g, starts[k]) : buckets[k].wait;
      const ir::AttrMap attrs{{"world", world}, {"rank", rank}, {"seq", *ir::getInt(buckets[k].start->attrs(), "seq")},
                              {"bucket", buckets[k].number}, {"group", std::string(ir::kDataParallelAxis)}};
      auto wait = emitAt(g, at, "reduce_scatter_wait", {starts[k]->result(0)}, attrs, ir::Phase::comm);
      if (!wait) return wait.error();
      gradSource[k] = (*wait)->result(0);
    }
  }

  // 1 and 3. Shard state, one update per bucket, the all-gathers.
  std::unordered_set<const ir::Value*> oldState;
  std::unordered_set<const ir::Node*> dead;
  std::vector<ir::Node*> shardUpdates;
  std::int64_t seq = maxSeq + 1;
  for (size_t k = 0; k < buckets.size(); ++k) {
    const Bucket& b = buckets[k];
    const ir::Node& first = *b.updates[0];
    const std::int64_t s = ir::shardSize(b.total, world);
    const ir::TensorType shardType{b.params[0]->type().dtype, {s}};
    std::vector<ir::Value*> state;
    for (const ir::Value* replicated : ir::optimizerStateOperands(first)) {
      Expected<std::string> prefix = statePrefix(*replicated, *b.params[0]);
      if (!prefix) return prefix.error();
      const std::string name = *prefix + "bucket" + std::to_string(b.number);
      if (g.findNamed(name)) return Error{"optimizer-state sharding: the name '" + name + "' is already taken"};
      state.push_back(g.addParam(name, shardType,
                                 {{"init", std::string("zeros")},
                                  {"role", std::string("opt_state")},
                                  {"of", "gradient bucket " + std::to_string(b.number) + ".shard"},
                                  {"shard_of", joinNames(b.params)},
                                  {"shard_prefix", *prefix},
                                  {"shard_offset", rank * s},
                                  {"shard_world", world}}));
    }
    for (const ir::Node* u : b.updates) {
      dead.insert(u);
      for (const ir::Value* v : ir::optimizerStateOperands(*u)) oldState.insert(v);
    }
    std::vector<ir::Value*> operands(b.params.begin(), b.params.end());
    if (gradientShards) {
      operands.push_back(gradSource[k]);
    } else {
      for (size_t r = 0; r < b.wait->numResults(); ++r) operands.push_back(b.wait->result(r));
    }
    ir::AttrMap attrs{{"parts", static_cast<std::int64_t>(b.params.size())},
                      {"offset", rank * s},
                      {"shard", s},
                      {"grad_shard", gradientShards}};
    for (const char* a : {"beta1", "beta2", "eps", "momentum"})
      if (auto v = ir::getFloat(first.attrs(), a)) attrs[a] = *v;
    attrs["weight_decay"] = bucketDecay[k];
    std::vector<std::int64_t> noDecay;
    for (size_t i = 0; i < b.updates.size(); ++i)
      if (bucketDecay[k] != 0.0 && ir::getFloat(b.updates[i]->attrs(), "weight_decay").value_or(0.0) == 0.0)
        noDecay.push_back(static_cast<std::int64_t>(i));
    if (!noDecay.empty()) attrs["no_decay_parts"] = std::move(noDecay);
    // The update's operands after its gradient, in its order, its state replaced by the shards
    // (adamw: m, v, lr, step, scale; sgd: lr, scale[, momentum]).
    const int stateBegin = first.op().stateBegin;
    for (size_t i = 2; i < first.numOperands(); ++i) {
      const int at = static_cast<int>(i);
      operands.push_back(at >= stateBegin && at < first.op().stateEnd ? state[static_cast<size_t>(at - stateBegin)]
                                                                       : first.operand(i));
    }
    Expected<ir::Node*> update = emitAt(g, nullptr, first.op().shardedForm, operands, attrs, ir::Phase::opt);
    if (!update) return update.error();
    shardUpdates.push_back(*update);
  }

  // Clipping under stage 2: the global norm from the ranks' squared shard norms.
  if (norm && gradientShards) {
    auto local = emitAt(g, norm, "global_norm", gradSource, {{"squared", true}}, ir::Phase::opt);
    if (!local) return local.error();
    const ir::AttrMap attrs{{"world", world}, {"seq", seq++}, {"bucket", std::int64_t{-2}}, {"group", std::string(ir::kDataParallelAxis)}};
    auto start = emitAt(g, norm, "all_reduce_start", {(*local)->result(0)}, attrs, ir::Phase::comm);
    if (!start) return start.error();
    ir::AttrMap waitAttrs = attrs;
    waitAttrs["part_ranks"] = std::vector<std::int64_t>{0};
    waitAttrs["part_shapes"] = std::vector<std::int64_t>{};
    auto wait = emitAt(g, norm, "all_reduce_wait", {(*start)->result(0)}, waitAttrs, ir::Phase::comm);
    if (!wait) return wait.error();
    auto root = emitAt(g, norm, "norm_from_squares", {(*wait)->result(0)}, {}, ir::Phase::opt);
    if (!root) return root.error();
    g.replaceAllUsesWith(norm->result(0), (*root)->result(0));
    dead.insert(norm);
  }

  for (size_t k = 0; k < buckets.size(); ++k) {
    std::vector<ir::Value*> operands(buckets[k].params.begin(), buckets[k].params.end());
    operands.push_back(shardUpdates[k]->result(0));
    const ir::AttrMap attrs{{"world", world}, {"rank", rank}, {"seq", seq++}, {"bucket", buckets[k].number},
                            {"group", std::string(ir::kDataParallelAxis)}};
    if (auto gather = emitAt(g, nullptr, "all_gather_params", operands, attrs, ir::Phase::comm); !gather)
      return gather.error();
  }

  // The replaced nodes (updates, and under stage 2 the all-reduces) and the replicated state.
  if (gradientShards)
    for (const Bucket& b : buckets) {
      dead.insert(b.wait);
      dead.insert(b.start);
    }
  for (const ir::Node* n : dead)
    for (size_t r = 0; r < n->numResults(); ++r) {
      const ir::Value* v = n->result(r);
      bool stillRead = v->isGraphOutput();
      for (const ir::Use& u : v->uses()) stillRead |= dead.count(u.user) == 0;
      if (stillRead)
        return Error{"optimizer-state sharding: a replaced " + std::string(n->opName()) +
                     " result is still read by another node or an output"};
    }
  for (const ir::Value* p : oldState)
    for (const ir::Use& u : p->uses())
      if (dead.count(u.user) == 0)
        return Error{"optimizer-state sharding: the optimizer state '" + p->name() + "' is read outside its update"};
  g.eraseIf([&](const ir::Node& n) { return dead.count(&n) > 0; });
  g.eraseParamsIf([&](const ir::Value& p) { return oldState.count(&p) > 0; });
  if (stage == ZeroStage::Parameters) return shardParameters(g, o);
  return {};
}

Expected<bool> ShardStatePass::run(ir::Graph& graph) {
  if (options_.shardStage() == ZeroStage::Replicated || options_.world == 1) return false;
  if (Status s = shardOptimizerState(graph, options_); !s) return s.error();
  return true;
}

ZeroStage shardStageOf(const ir::Graph& graph) {
  ZeroStage stage = ZeroStage::Replicated;
  for (const auto& n : graph.nodes()) {
    if (n->op().collective == ir::Collective::AllGatherStart) return ZeroStage::Parameters;
    if (n->op().collective == ir::Collective::ReduceScatterStart) stage = ZeroStage::Gradients;
    if (stage == ZeroStage::Gradients) continue;
    if (n->op().role == ir::OpRole::ShardedOptimizerUpdate) stage = ZeroStage::OptimizerState;
  }
  return stage;
}

CommunicationVolume communicationVolume(const ir::Graph& graph) {
  CommunicationVolume v;
  for (const auto& n : graph.nodes()) {
    const std::int64_t world = ir::getInt(n->attrs(), "world").value_or(1);
    if (world <= 1) continue;
    auto ring = [&](std::int64_t bytes) { return bytes * (world - 1) / world; };
    switch (n->op().collective) {
      case ir::Collective::AllReduceStart: v.allReduceBytes += 2 * ring(n->result(0)->type().bytes()); break;
      case ir::Collective::ReduceScatterStart: v.reduceScatterBytes += ring(n->result(0)->type().bytes()); break;
      case ir::Collective::AllGatherParams:
        v.allGatherBytes += ring(world * n->operands().back()->type().bytes());
        break;
      case ir::Collective::AllGatherStart: v.allGatherBytes += ring(n->result(0)->type().bytes()); break;
      case ir::Collective::Scatter:  // the root sends every other rank its rows
        v.otherBytes += ring(n->operand(0)->type().bytes());
        break;
      case ir::Collective::GatherSend:  // every other rank sends its rows to the root
        for (const ir::Value* x : n->operands()) v.otherBytes += x->type().bytes();
        break;
      default: break;
    }
  }
  return v;
}

}  // namespace gradc::passes
