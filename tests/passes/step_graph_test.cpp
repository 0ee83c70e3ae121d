// The step graph (passes/memory/step_graph.h) is what every budget decision is measured on, so it must
// be exactly the graph it stands for:
//   - a proposal's step graph built from the plan, without rewriting, equals the step graph of
//     the rewritten graph, field by field, for every proposal of every strategy;
//   - the liveness sweep over it (passes/memory/lifetimes.h, the one model every peak and every
//     plan comes from) agrees, step by step, with a direct reading of the model's definition on
//     the IR: a buffer lives from its producer's step to the last step reading it through any
//     alias (graph outputs to the end), persistent values throughout, plus the running node's
//     workspace.
// On bundled models (dense, recurrent, attention, convolutional), micro-batched, fused-loss,
// data-parallel and ZeRO-sharded steps, and random DAGs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frontend/spec.h"
#include "passes/data_parallel.h"
#include "passes/memory/lifetimes.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "passes/memory/peak_bound.h"
#include "passes/remat_free_path.h"
#include "passes/remat_strategies.h"
#include "passes/schedule.h"
#include "passes/memory/step_graph.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

namespace gradc {
namespace {

using passes::RematStrategy;

std::vector<int> flat(const passes::Lists& l) {
  std::vector<int> out = l.start;
  out.insert(out.end(), l.items.begin(), l.items.end());
  return out;
}

void checkEqual(const passes::StepGraph& made, const passes::StepGraph& real) {
  REQUIRE(made.size() == real.size());
  for (size_t i = 0; i < made.size(); ++i) {
    CAPTURE(i);
    REQUIRE(made.nodes[i]->opName() == real.nodes[i]->opName());
  }
  CHECK(made.flags == real.flags);
  CHECK(made.workspace == real.workspace);
  CHECK(made.fresh == real.fresh);
  CHECK(flat(made.producers) == flat(real.producers));
  CHECK(flat(made.users) == flat(real.users));
  CHECK(flat(made.groupsRead) == flat(real.groupsRead));
  CHECK(flat(made.groupUsers) == flat(real.groupUsers));
  CHECK(made.groupStart == real.groupStart);
  CHECK(made.groupProducer == real.groupProducer);
  CHECK(made.groupBytes == real.groupBytes);
  CHECK(made.groupPinned == real.groupPinned);
  CHECK(made.orderEdges == real.orderEdges);
  CHECK(made.persistentBytes == real.persistentBytes);
}

// The model's definition read directly on the IR, over `order`: the live bytes at each step.
std::vector<std::int64_t> referenceLiveBytes(const ir::Graph& g, const passes::StorageModel& storage,
                                             const std::vector<const ir::Node*>& order) {
  std::map<const ir::Value*, std::pair<int, int>> interval;  // owner -> [first, last]
  const int last = static_cast<int>(order.size()) - 1;
  for (int s = 0; s <= last; ++s) {
    const ir::Node& node = *order[static_cast<size_t>(s)];
    for (const ir::Value* operand : node.operands()) {
      auto it = interval.find(storage.owner(operand));
      if (it != interval.end()) it->second.second = std::max(it->second.second, s);
    }
    for (size_t r = 0; r < node.numResults(); ++r)
      if (!storage.isView(node.result(r))) interval[node.result(r)] = {s, s};
  }
  for (const ir::GraphOutput& out : g.outputs()) {
    auto it = interval.find(storage.owner(out.value));
    if (it != interval.end()) it->second.second = last;
  }
  std::int64_t persistent = 0;
  for (const auto& p : g.params()) persistent += p->type().bytes();
  for (const auto& in : g.inputs()) persistent += in->type().bytes();
  std::vector<std::int64_t> delta(order.size() + 1, 0);
  for (const auto& [owner, span] : interval) {
    delta[static_cast<size_t>(span.first)] += owner->type().bytes();
    delta[static_cast<size_t>(span.second) + 1] -= owner->type().bytes();
  }
  std::vector<std::int64_t> live(order.size(), 0);
  std::int64_t running = persistent;
  for (size_t s = 0; s < order.size(); ++s) {
    running += delta[s];
    live[s] = running + storage.workspaceBytes(order[s]);
  }
  return live;
}

// The sweep over the program order and the scheduled order, against the reference; the peak
// and its step, the liveness buffers' intervals, and the lower bound under the peak.
void checkPeaks(const ir::Graph& g) {
  const passes::StorageModel storage = passes::analyzeStorage(g);
  const passes::StepGraph step = passes::buildStepGraph(passes::StepFacts(g, storage));
  const std::vector<int> scheduled = passes::scheduleOrder(step);
  for (const std::vector<int>& order : {passes::programOrder(step), scheduled}) {
    std::vector<const ir::Node*> nodes;
    for (int i : order) nodes.push_back(step.nodes[static_cast<size_t>(i)]);
    const std::vector<std::int64_t> reference = referenceLiveBytes(g, storage, nodes);
    const passes::Liveness l = passes::analyzeLiveness(g, storage, nodes);
    CHECK(l.liveBytes == reference);
    std::int64_t peak = l.persistentBytes;
    int peakStep = 0;
    for (size_t s = 0; s < reference.size(); ++s)
      if (reference[s] > peak) {
        peak = reference[s];
        peakStep = static_cast<int>(s);
      }
    const passes::StepPeak p = passes::stepPeak(step, order);
    CHECK(p.bytes == peak);
    CHECK(p.step == peakStep);
    CHECK(l.peakBytes == peak);
    CHECK(l.peakStep == peakStep);
    // Each step's live bytes are the buffers alive at it plus the running node's workspace.
    std::vector<std::int64_t> delta(nodes.size() + 1, 0);
    for (const passes::Buffer& b : l.buffers) {
      delta[static_cast<size_t>(b.firstStep)] += b.bytes;
      delta[static_cast<size_t>(b.lastStep) + 1] -= b.bytes;
    }
    std::vector<std::int64_t> fromBuffers(nodes.size(), 0);
    std::int64_t running = 0;
    for (size_t s = 0; s < nodes.size(); ++s) {
      running += delta[s];
      fromBuffers[s] = running + l.workspaceBytes[s];
    }
    CHECK(fromBuffers == reference);
    CHECK(passes::peakLowerBoundNear(step, order, p.step) <= p.bytes);
  }
  CHECK(passes::scheduledPeak(step).bytes == passes::scheduledPeakBytes(g));
}

// Every collective's seq, in program order.
std::vector<std::int64_t> collectiveSeqs(const ir::Graph& g) {
  std::vector<std::int64_t> seqs;
  for (const auto& n : g.nodes())
    if (n->op().collective != ir::Collective::None) seqs.push_back(ir::getInt(n->attrs(), "seq").value_or(-1));
  return seqs;
}

// Every proposal of every strategy on a planned step without recompute: the step graph made
// from the plan against the one of the rewritten graph. Returns how many proposals;
// `regathering`, how many of them gather parameters again for recomputed nodes.
int checkProposals(ir::Graph& g, int* regathering = nullptr) {
  checkPeaks(g);
  const std::vector<std::int64_t> seqs = collectiveSeqs(g);
  Expected<passes::remat::Analysis> a = passes::remat::analyze(g);
  REQUIRE_MESSAGE(a.ok(), a.error().message);
  const passes::StepFacts facts(g, passes::analyzeStorage(g));
  int count = 0;
  for (const passes::remat::Candidate& c : passes::remat::candidatesWithFreePath(*a, RematStrategy::Auto, &facts)) {
    CAPTURE(c.description);
    const passes::RewritePlan plan = passes::remat::planRewrite(*a, c);
    const passes::StepGraph made = passes::buildStepGraph(facts, &plan);
    const passes::remat::AppliedRewrite applied = passes::remat::applyRewrite(g, plan);
    const passes::StepGraph real = passes::buildStepGraph(passes::StepFacts(g, passes::analyzeStorage(g)));
    checkEqual(made, real);
    CHECK(passes::scheduledPeak(made).bytes == passes::scheduledPeakBytes(g));
    // The floor the chain strategy's choice relies on: no proposal peaks below the graph's
    // persistent bytes, in any order.
    CHECK(facts.persistentBytes() <= passes::stepPeak(made, passes::programOrder(made)).bytes);
    CHECK(facts.persistentBytes() <= passes::scheduledPeak(made).bytes);
    checkPeaks(g);
    // Gathers made again for recompute: every issuing collective numbered once, in program order.
    const bool regathers = std::any_of(plan.clones.begin(), plan.clones.end(), [](const passes::CloneOp& clone) {
      return clone.of->op().collective == ir::Collective::AllGatherStart;
    });
    if (regathers) {
      std::int64_t next = 0;
      for (const auto& n : g.nodes())
        if (n->op().issuesCollective) CHECK(ir::getInt(n->attrs(), "seq") == next++);
      if (regathering) ++*regathering;
    }
    passes::remat::undoRewrite(g, applied);
    CHECK(collectiveSeqs(g) == seqs);
    ++count;
  }
  return count;
}

passes::TrainingPlan planned(const ir::Graph& forward, passes::TrainingPlanOptions options = {}) {
  options.remat = RematStrategy::None;
  options.plan.budgetBytes = std::nullopt;
  Expected<passes::TrainingPlan> c = passes::chooseTrainingPlan(forward, options);
  REQUIRE_MESSAGE(c.ok(), c.error().message);
  return std::move(*c);
}

TEST_CASE("step graph: a proposal made from its plan equals the rewritten graph's, on bundled models") {
  const std::vector<std::pair<std::string, testing::DimOverrides>> models = {
      {"mlp", {{"depth", "6"}}},
      {"gpt-mini", {{"batch", "2"}, {"seq", "8"}, {"d_model", "16"}, {"layers", "2"}}},
      {"lstm-lm", {{"batch", "2"}, {"seq", "6"}}},
      {"resnet18-cifar", {{"batch", "2"}}},
  };
  for (const auto& [name, dims] : models) {
    CAPTURE(name);
    passes::TrainingPlan c = planned(testing::compileBundledModel(name, dims));
    const int proposals = checkProposals(c.graph);
    CHECK(proposals >= 4);
    MESSAGE(name << ": " << proposals << " proposals, each equal to its rewrite");
  }
}

TEST_CASE("step graph: micro-batched, fused-loss, data-parallel and sharded steps") {
  const ir::Graph gpt = testing::compileBundledModel(
      "gpt-mini", {{"batch", "4"}, {"seq", "8"}, {"vocab", "37"}, {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}});
  SUBCASE("two micro-batches") {
    passes::TrainingPlanOptions o;
    o.microBatches = 2;
    passes::TrainingPlan c = planned(gpt, o);
    CHECK(c.report.config.microBatches == 2);
    checkProposals(c.graph);
  }
  SUBCASE("fused loss, at several chunk counts") {
    passes::TrainingPlanOptions o;
    o.lossChunks = passes::LossChunking{passes::LossChunking::Mode::Fixed, 4};
    passes::TrainingPlan c = planned(gpt, o);
    REQUIRE(c.report.config.lossChunks == 4);
    checkProposals(c.graph);
  }
  // Stage 3 gathered again (keep 0) with and without prefetch, and with every bucket kept.
  struct Sharding {
    int shard, keep = 0;
    bool prefetch = true;
  };
  for (const Sharding sharding : {Sharding{0}, Sharding{1}, Sharding{2}, Sharding{3}, Sharding{3, 0, false},
                                  Sharding{3, -1}}) {
    CAPTURE(sharding.shard);
    CAPTURE(sharding.keep);
    CAPTURE(sharding.prefetch);
    passes::DataParallelOptions dp;
    dp.world = 2;
    dp.rank = 1;
    dp.shard = static_cast<passes::ZeroStage>(sharding.shard);
    dp.keepGathered = sharding.keep;
    dp.prefetch = sharding.prefetch;
    dp.bucketBytes = 8 << 10;
    dp.firstBucketBytes = 4 << 10;
    Expected<ir::Graph> local = passes::partitionForward(gpt, dp);
    REQUIRE_MESSAGE(local.ok(), local.error().message);
    passes::TrainingPlanOptions o;
    o.dataParallel = dp;
    o.optimizer = passes::OptimizerOptions{};
    passes::TrainingPlan c = planned(*local, o);
    int collectives = 0;
    for (const auto& n : c.graph.nodes()) collectives += n->op().issuesCollective ? 1 : 0;
    CHECK(collectives > 2);
    int regathering = 0;
    const int proposals = checkProposals(c.graph, &regathering);
    // Recompute under stage 3 gathers a bucket again unless the bucket is kept.
    if (sharding.shard == 3 && sharding.keep == 0) CHECK(regathering > 0);
    else CHECK(regathering == 0);
    CHECK(proposals > regathering);
  }
}

TEST_CASE("step graph: random DAGs with residual blocks and branches") {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    CAPTURE(seed);
    std::string y = "model: sg" + std::to_string(seed) + "\ndims: {batch: " + std::to_string(2 + seed % 3) +
                    ", d: " + std::to_string(8 + 4 * (seed % 4)) + "}\nseed: " + std::to_string(seed) +
                    "\ninputs:\n  x: {shape: [batch, d], dtype: f32}\n  y: {shape: [batch, d], dtype: f32}\nlayers:\n";
    std::string prev = "x";
    for (unsigned b = 0; b < 3 + seed % 4; ++b) {
      const std::string n = "b" + std::to_string(b);
      y += "  - {op: linear, name: " + n + "a, input: " + prev + ", out: d}\n";
      y += "  - {op: " + std::string(b % 2 ? "gelu" : "tanh") + ", output: " + n + "_act}\n";
      std::string branch = n + "_act";
      if ((seed + b) % 2 == 0) {  // a second branch from the same input
        y += "  - {op: linear, name: " + n + "s, input: " + prev + ", out: d, output: " + n + "_s}\n";
        y += "  - {op: mul, inputs: [" + n + "_act, " + n + "_s], output: " + n + "_m}\n";
        branch = n + "_m";
      }
      y += "  - {op: add, inputs: [" + branch + ", " + prev + "], output: " + n + "_r}\n";
      prev = n + "_r";
    }
    y += "loss: {op: mse, input: _, target: y}\n";
    frontend::SpecResult r = frontend::compileSpec(y, "sg.yaml");
    REQUIRE_MESSAGE(r.ok(), (r.diagnostics.empty() ? "" : r.diagnostics.front().message));
    passes::TrainingPlan c = planned(*r.graph);
    checkProposals(c.graph);
  }
}

}  // namespace
}  // namespace gradc
