#include "passes/data_parallel.h"

#include <algorithm>
#include <string>

#include "ir/device_mesh.h"
#include "passes/budget.h"
#include "passes/build_node.h"
#include "passes/micro_batch.h"

namespace gradc::passes {

namespace {

constexpr std::string_view kSpecName = "data_parallel";

bool isCollective(const ir::Node& n) { return n.op().issuesCollective || n.op().name == "all_reduce_wait"; }

Expected<ir::Node*> emitAt(ir::Graph& g, ir::Node* before, std::string_view op, std::vector<ir::Value*> operands,
                           ir::AttrMap attrs, ir::Phase phase) {
  return buildNode(g, "data parallelism", op, std::move(operands), std::move(attrs), phase, std::string(kSpecName),
                   before);
}

// The node after `n` in program order (nullptr: n is last).
ir::Node* nextNode(const ir::Graph& g, const ir::Node* n) {
  size_t i = *g.indexOf(n) + 1;
  return i < g.numNodes() ? g.nodes()[i].get() : nullptr;
}

std::string evenBatches(std::int64_t batch, int world) {
  const std::int64_t below = batch / world * world, above = below + world;
  std::string s = below > 0 ? std::to_string(below) + " or " + std::to_string(above) : std::to_string(above);
  return s;
}

// Random nodes draw their rows of the single-device stream (or an independent stream).
void placeRandomStreams(const ir::Graph& forward, ir::Graph& local, const DataParallelOptions& o) {
  std::int64_t span = 1;
  for (const auto& n : local.nodes())
    if (n->op().random) span = std::max(span, ir::getInt(n->attrs(), "rng").value_or(0) + 1);
  local.attrs()["rng_streams"] = span * o.world;  // the keys of all ranks (micro-batching strides past them)
  for (size_t i = 0; i < local.numNodes(); ++i) {
    ir::Node& n = *local.nodes()[i];
    if (!n.op().random) continue;
    const ir::TensorType& full = forward.nodes()[i]->result(0)->type();
    const ir::TensorType& part = n.result(0)->type();
    const bool leadingBatch = part.rank() > 0 && full.rank() == part.rank() && full.shape[0] == part.shape[0] * o.world &&
                              std::equal(full.shape.begin() + 1, full.shape.end(), part.shape.begin() + 1);
    if (leadingBatch && ir::findAttrSpec(n.op(), "rng_offset")) {
      n.attrs()["rng_offset"] = ir::getInt(n.attrs(), "rng_offset").value_or(0) + o.rank * part.numel();
    } else {
      n.attrs()["rng"] = ir::getInt(n.attrs(), "rng").value_or(0) + o.rank * span;
    }
  }
}

Status placeLossGather(const ir::Graph& forward, ir::Graph& local, const DataParallelOptions& o) {
  ir::Value* loss = local.findOutput("loss");
  ir::Node* node = loss->producer();
  const ir::Node& full = *forward.nodes()[*local.indexOf(node)];
  std::vector<size_t> sharded;
  for (size_t i = 0; i < node->numOperands(); ++i) {
    const ir::TensorType& p = node->operand(i)->type();
    const ir::TensorType& f = full.operand(i)->type();
    if (p.rank() > 0 && f.rank() == p.rank() && f.shape[0] == p.shape[0] * o.world) sharded.push_back(i);
  }
  if (sharded.empty())
    return Error{"--loss-placement gather: the loss node " + std::string(node->opName()) + " '" + node->specName() +
                 "' reads nothing with the batch axis, so there is nothing to gather"};
  std::vector<ir::Value*> parts;
  for (size_t i : sharded) parts.push_back(node->operand(i));
  ir::AttrMap attrs{{"world", std::int64_t{o.world}}, {"root", std::int64_t{0}}, {"seq", std::int64_t{0}}, {"group", std::string(ir::kDataParallelAxis)}};
  if (o.rank == 0) {
    auto gather = emitAt(local, node, "gather", parts, attrs, ir::Phase::fwd);
    if (!gather) return gather.error();
    for (size_t k = 0; k < sharded.size(); ++k) node->setOperand(sharded[k], (*gather)->result(k));
  } else {
    // The loss node stays behind with no user; the pipeline's dead-code elimination drops it.
    // The stand-in loss has the loss's dtype, so the loss all-reduce matches across ranks.
    attrs["dtype"] = loss->type().dtype;
    auto send = emitAt(local, node, "gather_send", parts, attrs, ir::Phase::fwd);
    if (!send) return send.error();
    local.setOutput("loss", (*send)->result(0));
  }
  return {};
}

Status placeLossLocal(ir::Graph& local, const DataParallelOptions& o) {
  ir::Value* loss = local.findOutput("loss");
  auto scaled = emitAt(local, nextNode(local, loss->producer()), "scale", {loss},
                           {{"factor", 1.0 / static_cast<double>(o.world)}}, loss->producer()->phase());
  if (!scaled) return scaled.error();
  local.setOutput("loss", (*scaled)->result(0));
  return {};
}

}  // namespace

Expected<LossPlacement> parseLossPlacement(std::string_view name) {
  if (name == "local") return LossPlacement::Local;
  if (name == "gather") return LossPlacement::Gather;
  return Error{"unknown loss placement '" + std::string(name) + "' (expected local or gather)"};
}

std::string_view lossPlacementName(LossPlacement placement) {
  return placement == LossPlacement::Local ? "local" : "gather";
}

Expected<std::optional<ZeroStage>> parseZeroStage(std::string_view text) {
  if (text == "0") return std::optional<ZeroStage>(ZeroStage::Replicated);
  if (text == "1") return std::optional<ZeroStage>(ZeroStage::OptimizerState);
  if (text == "2") return std::optional<ZeroStage>(ZeroStage::Gradients);
  if (text == "3") return std::optional<ZeroStage>(ZeroStage::Parameters);
  if (text == "auto") return std::optional<ZeroStage>();
  return Error{"--shard expects 0, 1, 2, 3 or auto, got '" + std::string(text) + "'"};
}

std::string_view zeroStageSummary(ZeroStage stage) {
  switch (stage) {
    case ZeroStage::OptimizerState: return "optimizer state sharded";
    case ZeroStage::Gradients: return "optimizer state and gradients sharded";
    case ZeroStage::Parameters: return "optimizer state, gradients and parameters sharded";
    case ZeroStage::Replicated: break;
  }
  return "replicated";
}

Expected<ir::Graph> partitionForward(const ir::Graph& forward, const DataParallelOptions& o) {
  if (o.world < 1) return Error{"data parallelism: the number of devices must be at least 1, got " + std::to_string(o.world)};
  if (o.rank < 0 || o.rank >= o.world)
    return Error{"data parallelism: rank " + std::to_string(o.rank) + " is not in [0, " + std::to_string(o.world) + ")"};
  for (const auto& n : forward.nodes())
    if (isCollective(*n)) return Error{"data parallelism: the graph is already partitioned (it has " +
                                       std::string(n->opName()) + ")"};
  auto batch = batchSize(forward);
  if (!batch) return batch.error();
  if (o.world > 1 && *batch % o.world != 0)
    return Error{"data parallelism: the batch of " + std::to_string(*batch) + " examples does not split evenly over " +
                 std::to_string(o.world) + " devices; use a batch of " + evenBatches(*batch, o.world) +
                 " (e.g. --set batch=N), or another device count"};
  if (!forward.findOutput("loss")) return Error{"data parallelism: the graph has no output named 'loss'"};
  auto local = rebatchForward(forward, *batch, o.world, "data parallelism");
  if (!local) return local.error();
  if (!o.communicates()) return std::move(*local);
  placeRandomStreams(forward, *local, o);
  Status placed = o.placement == LossPlacement::Gather ? placeLossGather(forward, *local, o) : placeLossLocal(*local, o);
  if (!placed) return placed.error();
  return std::move(*local);
}

Status insertCollectives(ir::Graph& g, const DataParallelOptions& o) {
  if (!o.communicates()) return {};
  if (o.bucketBytes <= 0 || o.firstBucketBytes <= 0) return Error{"data parallelism: bucket sizes must be positive"};
  ir::setMesh(g, ir::DeviceMesh::dataParallel(o.world));  // every collective spans its dp axis
  std::int64_t seq = 0;
  for (const auto& n : g.nodes())
    if (isCollective(*n)) seq = std::max(seq, *ir::getInt(n->attrs(), "seq") + 1);
  const ir::AttrMap common{{"world", std::int64_t{o.world}}, {"group", std::string(ir::kDataParallelAxis)}};
  auto attrsFor = [&](std::int64_t bucket) {
    ir::AttrMap a = common;
    a["seq"] = seq;
    a["bucket"] = bucket;
    return a;
  };

  // Collect the final gradients in production order.
  struct Grad {
    std::string output;
    ir::Value* value;
    size_t index;
  };
  std::vector<Grad> grads;
  for (const ir::GraphOutput& out : g.outputs()) {
    if (out.name.rfind("grad.", 0) != 0) continue;
    const ir::Node* producer = out.value->producer();
    if (!producer) return Error{"data parallelism: gradient output '" + out.name + "' is not computed by a node"};
    grads.push_back({out.name, out.value, *g.indexOf(producer)});
  }
  std::stable_sort(grads.begin(), grads.end(), [](const Grad& a, const Grad& b) { return a.index < b.index; });

  auto reduce = [&](const std::vector<Grad>& parts, std::int64_t bucket) -> Status {
    std::vector<ir::Value*> operands;
    std::vector<std::int64_t> ranks, extents;
    const ir::Node* last = nullptr;
    for (const Grad& p : parts) {
      operands.push_back(p.value);
      ranks.push_back(p.value->type().rank());
      extents.insert(extents.end(), p.value->type().shape.begin(), p.value->type().shape.end());
      if (!last || *g.indexOf(p.value->producer()) > *g.indexOf(last)) last = p.value->producer();
    }
    auto start = emitAt(g, nextNode(g, last), "all_reduce_start", operands, attrsFor(bucket), ir::Phase::comm);
    if (!start) return start.error();
    ir::AttrMap waitAttrs = attrsFor(bucket);
    waitAttrs["part_ranks"] = ranks;
    waitAttrs["part_shapes"] = extents;
    auto wait = emitAt(g, nullptr, "all_reduce_wait", {(*start)->result(0)}, std::move(waitAttrs), ir::Phase::comm);
    if (!wait) return wait.error();
    for (size_t k = 0; k < parts.size(); ++k) g.setOutput(parts[k].output, (*wait)->result(k));
    ++seq;
    return {};
  };

  if (ir::Value* loss = g.findOutput("loss")) {
    if (!loss->producer()) return Error{"data parallelism: the loss output is not computed by a node"};
    if (Status s = reduce({Grad{"loss", loss, *g.indexOf(loss->producer())}}, -1); !s) return s;
  }
  std::vector<Grad> bucket;
  std::int64_t bucketBytes = 0, number = 0;
  for (const Grad& grad : grads) {
    const std::int64_t cap = number == 0 ? o.firstBucketBytes : o.bucketBytes;
    const std::int64_t bytes = grad.value->type().bytes();
    const bool otherDtype = !bucket.empty() && bucket.front().value->type().dtype != grad.value->type().dtype;
    if (!bucket.empty() && (bucketBytes + bytes > cap || otherDtype)) {
      if (Status s = reduce(bucket, number++); !s) return s;
      bucket.clear();
      bucketBytes = 0;
    }
    bucket.push_back(grad);
    bucketBytes += bytes;
  }
  if (!bucket.empty())
    if (Status s = reduce(bucket, number); !s) return s;
  return {};
}

std::vector<GradientBucket> gradientBuckets(const ir::Graph& graph) {
  std::vector<GradientBucket> out;
  for (const auto& n : graph.nodes()) {
    if (n->op().collective != ir::Collective::AllReduceStart && n->op().collective != ir::Collective::ReduceScatterStart)
      continue;
    const std::int64_t bucket = ir::getInt(n->attrs(), "bucket").value_or(-1);
    if (bucket < 0) continue;  // the loss
    std::int64_t bytes = 0;  // the gradients (a reduce-scatter's bucket also holds its padding)
    for (const ir::Value* v : n->operands()) bytes += v->type().bytes();
    out.push_back({bucket, *ir::getInt(n->attrs(), "seq"), static_cast<std::int64_t>(n->numOperands()), bytes});
  }
  std::sort(out.begin(), out.end(), [](const GradientBucket& a, const GradientBucket& b) { return a.seq < b.seq; });
  return out;
}

}  // namespace gradc::passes
