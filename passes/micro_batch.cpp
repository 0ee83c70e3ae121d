#include "passes/micro_batch.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "ir/printer.h"
#include "passes/autodiff.h"
#include "passes/build_node.h"
#include "passes/remat_strategies.h"

namespace gradc::passes {

namespace {

std::string quoted(const ir::Graph& graph, const ir::Node& node) {
  return "'" + ir::printNode(node, ir::ValueNames(graph)) + "'";
}

// Whether the node works along axis 0 of its first operand: an axis attribute (`dim`, `dim0`,
// `dim1`: softmax, transpose, concat, ...) naming it, or a reduction's `dims` (normalised
// ascending; empty: every axis) that includes it. Of a batched operand, that axis is the batch:
// such a node mixes examples, and a split batch would compute another model.
bool batchAxisAttr(const ir::Node& node) {
  const int rank = node.numOperands() > 0 ? node.operand(0)->type().rank() : 0;
  for (const char* key : {"dim", "dim0", "dim1"})
    if (std::optional<std::int64_t> d = ir::getInt(node.attrs(), key))
      if (*d == 0 || (rank > 0 && *d == -rank)) return true;
  if (std::optional<std::vector<std::int64_t>> dims = ir::getIntList(node.attrs(), "dims"))
    if (rank > 0 && (dims->empty() || std::find(dims->begin(), dims->end(), 0) != dims->end())) return true;
  return false;
}

}  // namespace

namespace {

// rebatchForward, also naming the node that mixes examples when that is why it fails.
Expected<ir::Graph> rebatch(const ir::Graph& forward, std::int64_t batch, int k, std::string_view purpose,
                            const ir::Node** mixing) {
  const std::string what(purpose);
  const std::int64_t micro = batch / k;
  ir::Graph g(forward.name());
  g.attrs() = forward.attrs();
  std::unordered_map<const ir::Value*, ir::Value*> map;
  for (const auto& in : forward.inputs()) {
    ir::TensorType t = in->type();
    if (in->isBatchedInput()) t.shape[0] = micro;
    ir::Value* v = g.addInput(in->name(), t);
    v->attrs() = in->attrs();
    map.emplace(in.get(), v);
  }
  for (const auto& p : forward.params()) map.emplace(p.get(), g.addParam(p->name(), p->type(), p->attrs()));
  for (const auto& n : forward.nodes()) {
    std::vector<ir::Value*> operands;
    for (const ir::Value* v : n->operands()) operands.push_back(map.at(v));
    const bool batched = !operands.empty() && operands[0]->type().numel() != n->operand(0)->type().numel();
    if (batched && batchAxisAttr(*n)) {
      if (mixing) *mixing = n.get();
      return Error{what + ": node " + quoted(forward, *n) +
                   " works along the batch axis (it mixes examples), so splitting the batch would change its "
                   "result; keep the whole batch on one device in one micro-batch, or reduce over other axes"};
    }
    ir::AttrMap attrs = n->attrs();
    if (std::optional<std::vector<std::int64_t>> shape = ir::getIntList(attrs, "shape"); shape && !shape->empty()) {
      if (batched) {
        if ((*shape)[0] <= 0 || (*shape)[0] % k != 0)
          return Error{what + ": cannot split node " + quoted(forward, *n) + " into " + std::to_string(k) +
                       " parts: its leading extent " + std::to_string((*shape)[0]) + " is not divisible by " +
                       std::to_string(k)};
        (*shape)[0] /= k;
        attrs["shape"] = std::move(*shape);
      } else if (operands.empty() && (*shape)[0] == batch) {
        (*shape)[0] = micro;
        attrs["shape"] = std::move(*shape);
      }
    }
    Expected<ir::Node*> c = g.create(n->op(), operands, std::move(attrs), n->phase(), n->specName());
    if (!c)
      return Error{what + ": cannot re-type node " + quoted(forward, *n) + " for " + std::to_string(micro) +
                   " examples: " + c.error().message};
    for (size_t r = 0; r < n->numResults(); ++r) map.emplace(n->result(r), (*c)->result(r));
  }
  for (const ir::GraphOutput& out : forward.outputs()) g.setOutput(out.name, map.at(out.value));
  return g;
}

}  // namespace

Expected<ir::Graph> rebatchForward(const ir::Graph& forward, std::int64_t batch, int k, std::string_view purpose) {
  return rebatch(forward, batch, k, purpose, nullptr);
}

const ir::Node* batchMixingNode(const ir::Graph& forward) {
  Expected<std::int64_t> batch = batchSize(forward);
  if (!batch) return nullptr;
  for (std::int64_t k = 2; k <= *batch; ++k)  // the smallest split shows the batched values
    if (*batch % k == 0) {
      const ir::Node* mixing = nullptr;
      (void)rebatch(forward, *batch, static_cast<int>(k), "", &mixing);
      return mixing;
    }
  return nullptr;
}

namespace {

Expected<ir::Value*> emit(ir::Graph& g, std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs,
                          ir::Phase phase) {
  Expected<ir::Node*> n = buildNode(g, "micro-batching", op, std::move(operands), std::move(attrs), phase, "micro_batch");
  if (!n) return n.error();
  return (*n)->result(0);
}

}  // namespace

Expected<std::int64_t> batchSize(const ir::Graph& forward) {
  std::int64_t batch = -1;
  const ir::Value* first = nullptr;
  for (const auto& in : forward.inputs()) {
    if (!in->isBatchedInput()) continue;
    if (in->type().rank() == 0)
      return Error{"micro-batching: input '" + in->name() +
                   "' is a scalar; a batched input needs a leading batch axis (mark it batched: false if it is "
                   "the same for every example)"};
    const std::int64_t b = in->type().shape[0];
    if (!first) {
      first = in.get();
      batch = b;
    }
    if (b != batch)
      return Error{"micro-batching: inputs disagree on the batch: '" + first->name() + "' has " +
                   std::to_string(batch) + " examples, '" + in->name() + "' has " + std::to_string(b) +
                   " (an input that is the same for every example, such as a mask, is marked batched: false)"};
  }
  if (!first) return Error{"micro-batching: the graph has no batched inputs to split"};
  return batch;
}

bool batchSplitsExactly(const ir::Graph& forward) {
  for (const auto& n : forward.nodes())
    if (n->op().batchStatistics) return false;
  return batchMixingNode(forward) == nullptr;
}

std::vector<int> microBatchCandidates(const ir::Graph& forward) {
  std::vector<int> ks;
  Expected<std::int64_t> batch = batchSize(forward);
  if (!batch) return {1};
  // Splitting would change batch statistics or mix examples: only an explicit count.
  if (!batchSplitsExactly(forward)) return {1};
  for (int k = 1; k <= kMaxAutoMicroBatches && k <= *batch; ++k)
    if (*batch % k == 0) ks.push_back(k);
  return ks;
}

namespace {

// The checks microBatchedGradients makes of its forward graph; the batch size.
Expected<std::int64_t> splittableBatch(const ir::Graph& forward, int k) {
  if (k < 1) return Error{"micro-batching: the number of micro-batches must be at least 1, got " + std::to_string(k)};
  for (const auto& n : forward.nodes())
    if (n->phase() != ir::Phase::fwd)
      return Error{"micro-batching: the graph already has " + std::string(ir::phaseName(n->phase())) +
                   " nodes; it takes a forward graph (it replaces autodiff)"};
  if (!forward.findOutput("loss")) return Error{"micro-batching: the graph has no 'loss' output"};
  for (const ir::GraphOutput& out : forward.outputs())
    if (out.name != "loss")
      return Error{"micro-batching: output '" + out.name + "' is not the loss; only a graph whose one output is 'loss' can be split"};
  Expected<std::int64_t> batch = batchSize(forward);
  if (!batch) return batch.error();
  if (*batch % k != 0) {
    std::string divisors;
    for (int d = 1; d <= *batch && d <= kMaxAutoMicroBatches; ++d)
      if (*batch % d == 0) divisors += (divisors.empty() ? "" : ", ") + std::to_string(d);
    return Error{"micro-batching: a batch of " + std::to_string(*batch) + " examples cannot be split into " +
                 std::to_string(k) + " equal micro-batches (divisors: " + divisors + ")"};
  }
  return *batch;
}

// One micro-batch: the graph itself, with autodiff's backward.
Expected<ir::Graph> withGradients(ir::Graph graph) {
  Autodiff autodiff;
  if (Expected<bool> r = autodiff.run(graph); !r) return r.error();
  return graph;
}

}  // namespace

Expected<ir::Graph> microBatchedGradients(ir::Graph&& forward, int k) {
  if (k != 1) return microBatchedGradients(static_cast<const ir::Graph&>(forward), k);
  if (Expected<std::int64_t> batch = splittableBatch(forward, k); !batch) return batch.error();
  return withGradients(std::move(forward));
}

Expected<ir::Graph> microBatchedGradients(const ir::Graph& forward, int k) {
  Expected<std::int64_t> batch = splittableBatch(forward, k);
  if (!batch) return batch.error();
  if (k == 1) return withGradients(remat::cloneGraph(forward));

  Expected<ir::Graph> micro = rebatchForward(forward, *batch, k, "micro-batching");
  if (!micro) return micro.error();
  {
    Autodiff autodiff;
    if (Expected<bool> r = autodiff.run(*micro); !r) return r.error();
  }
  const ir::Graph& m = *micro;

  // Keys in use: the forward's, or every rank's when data parallelism spread them (graph
  // attribute rng_streams, passes/data_parallel.h), so no two (rank, micro-batch) pairs share one.
  std::int64_t stride = std::max<std::int64_t>(1, ir::getInt(forward.attrs(), "rng_streams").value_or(1));
  for (const auto& n : forward.nodes())
    if (n->op().random)
      if (std::optional<std::int64_t> rng = ir::getInt(n->attrs(), "rng")) stride = std::max(stride, *rng + 1);

  ir::Graph out(forward.name());
  out.attrs() = forward.attrs();
  std::unordered_map<const ir::Value*, ir::Value*> outer;  // forward's inputs/params -> out's
  for (const auto& in : forward.inputs()) {
    ir::Value* v = out.addInput(in->name(), in->type());
    v->attrs() = in->attrs();
    outer.emplace(in.get(), v);
  }
  for (const auto& p : forward.params()) outer.emplace(p.get(), out.addParam(p->name(), p->type(), p->attrs()));

  const std::int64_t size = *batch / k;
  ir::Value* lossSum = nullptr;
  // Learned parameters, whose gradients are summed over the micro-batches.
  std::vector<const ir::Value*> learned;
  for (const auto& p : forward.params())
    if (ir::isLearned(*p)) learned.push_back(p.get());
  std::vector<ir::Value*> gradSums(learned.size(), nullptr);
  for (int j = 0; j < k; ++j) {
    std::unordered_map<const ir::Value*, ir::Value*> map;
    for (size_t i = 0; i < m.inputs().size(); ++i) {
      ir::Value* full = outer.at(forward.inputs()[i].get());
      if (!full->isBatchedInput()) {  // every micro-batch reads all of it
        map.emplace(m.inputs()[i].get(), full);
        continue;
      }
      Expected<ir::Node*> s = buildNode(out, "micro-batching", "slice", {full},
                                        {{"dim", std::int64_t{0}}, {"start", j * size}, {"end", (j + 1) * size}},
                                        ir::Phase::fwd, full->name());
      if (!s) return s.error();
      map.emplace(m.inputs()[i].get(), (*s)->result(0));
    }
    for (size_t i = 0; i < m.params().size(); ++i) map.emplace(m.params()[i].get(), outer.at(forward.params()[i].get()));
    const ir::Value* microLoss = m.findOutput("loss");
    bool lossAdded = false;
    auto addLoss = [&]() -> Status {
      // The running loss, right after this micro-batch's forward (phase fwd: it is the loss).
      ir::Value* l = map.at(microLoss);
      if (lossSum) {
        Expected<ir::Value*> sum = emit(out, "add", {lossSum, l}, {}, ir::Phase::fwd);
        if (!sum) return sum.error();
        l = *sum;
      }
      lossSum = l;
      if (j + 1 == k) {
        Expected<ir::Value*> mean = emit(out, "scale", {lossSum}, {{"factor", 1.0 / k}}, ir::Phase::fwd);
        if (!mean) return mean.error();
        lossSum = *mean;
      }
      lossAdded = true;
      return {};
    };
    for (const auto& n : m.nodes()) {
      if (!lossAdded && n->phase() != ir::Phase::fwd)
        if (Status s = addLoss(); !s) return s.error();
      std::vector<ir::Value*> operands;
      for (const ir::Value* v : n->operands()) operands.push_back(map.at(v));
      ir::AttrMap attrs = n->attrs();
      if (n->op().random)
        if (std::optional<std::int64_t> rng = ir::getInt(attrs, "rng")) attrs["rng"] = *rng + j * stride;
      ir::Node* c = out.createUnchecked(n->op(), operands, std::move(attrs), n->resultTypes(), n->phase(), n->specName());
      for (size_t r = 0; r < n->numResults(); ++r) map.emplace(n->result(r), c->result(r));
    }
    if (!lossAdded)
      if (Status s = addLoss(); !s) return s.error();
    for (size_t p = 0; p < gradSums.size(); ++p) {
      ir::Value* g = map.at(m.findOutput("grad." + learned[p]->name()));
      if (gradSums[p]) {
        Expected<ir::Value*> sum = emit(out, "add", {gradSums[p], g}, {}, ir::Phase::bwd);
        if (!sum) return sum.error();
        g = *sum;
      }
      gradSums[p] = g;
    }
  }
  out.setOutput("loss", lossSum);
  for (size_t p = 0; p < gradSums.size(); ++p) {
    Expected<ir::Value*> mean = emit(out, "scale", {gradSums[p]}, {{"factor", 1.0 / k}}, ir::Phase::bwd);
    if (!mean) return mean.error();
    out.setOutput("grad." + learned[p]->name(), *mean);
  }
  return out;
}

}  // namespace gradc::passes
