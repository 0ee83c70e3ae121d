// Micro-batching: the graph it builds (slices, one forward and backward per micro-batch, the
// accumulation, distinct dropout keys), its errors, and the training-step planner choosing the
// micro-batch count with the remat plan. Numerical equality with the full batch is checked by
// tests/runtime/remat_equivalence_test.cpp.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/bundled_model.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/plan/training_planner.h"
#include "passes/schedule.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/optimizer.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "frontend/spec.h"

using namespace gradc;

namespace {

ir::Graph forwardGraph(const std::string& model, std::vector<std::pair<std::string, std::string>> sets) {
  return testing::compileBundledModel(model, std::move(sets));
}

struct Model {
  std::string name;
  std::vector<std::pair<std::string, std::string>> sets;
};

std::vector<Model> models() {
  return {
      {"mlp", {{"batch", "8"}, {"features", "6"}, {"hidden", "24"}, {"outputs", "3"}, {"depth", "3"}}},
      {"gpt-mini", {{"batch", "4"}, {"seq", "16"}, {"vocab", "32"}, {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}}},
      {"lstm-lm", {{"batch", "4"}, {"seq", "6"}, {"vocab", "16"}, {"embed", "8"}, {"hidden", "8"}}},
      {"lm-seed", {{"batch", "4"}, {"seq", "8"}, {"vocab", "24"}, {"d_model", "12"}, {"heads", "2"}, {"layers", "2"}}},
  };
}

}  // namespace

TEST_CASE("micro-batched gradients: structure on every bundled model") {
  for (const Model& m : models()) {
    CAPTURE(m.name);
    ir::Graph forward = forwardGraph(m.name, m.sets);
    ir::Graph full = passes::remat::cloneGraph(forward);
    REQUIRE(passes::Autodiff().run(full).ok());
    for (int k : {2, 4}) {
      CAPTURE(k);
      Expected<ir::Graph> g = passes::microBatchedGradients(forward, k);
      REQUIRE_MESSAGE(g.ok(), (g.ok() ? "" : g.error().message));
      Status v = ir::verify(*g);
      REQUIRE_MESSAGE(v.ok(), v.message());
      // Same outputs, same types, as autodiff's.
      REQUIRE(g->outputs().size() == full.outputs().size());
      for (const ir::GraphOutput& out : full.outputs()) {
        ir::Value* mine = g->findOutput(out.name);
        REQUIRE_MESSAGE(mine != nullptr, out.name);
        CHECK((mine->type() == out.value->type()));
      }
      // k forward runs, each followed by its backward.
      int runs = 0;
      bool inForward = false;
      for (const auto& n : g->nodes()) {
        const bool fwd = n->phase() == ir::Phase::fwd;
        if (fwd && !inForward) ++runs;
        inForward = fwd;
      }
      CHECK(runs == k);
      // Every dropout of micro-batch j has its own key; forward and backward agree.
      std::map<std::int64_t, int> forwardKeys, backwardKeys;
      for (const auto& n : g->nodes())
        if (n->opName() == "dropout") (n->phase() == ir::Phase::fwd ? forwardKeys : backwardKeys)[*ir::getInt(n->attrs(), "rng")]++;
      for (const auto& [key, count] : forwardKeys) {
        CHECK(count == 1);
        CHECK(backwardKeys.count(key) == 1);
      }
      int fullDropouts = 0;
      for (const auto& n : forward.nodes()) fullDropouts += n->opName() == "dropout" ? 1 : 0;
      CHECK(forwardKeys.size() == static_cast<size_t>(fullDropouts * k));
      // Activations of one micro-batch at a time: a smaller peak than the full batch when
      // activations matter (gpt-mini and lm-seed at these sizes).
      const std::int64_t peakFull = passes::analyzeLiveness(full).peakBytes;
      const std::int64_t peakMicro = passes::analyzeLiveness(*g).peakBytes;
      MESSAGE(m.name << " k=" << k << ": peak " << peakMicro << " bytes (full batch " << peakFull << ")");
      if (m.name == "gpt-mini" || m.name == "lm-seed") CHECK(peakMicro < peakFull);
    }
    // k = 1 is autodiff on a copy, text for text.
    Expected<ir::Graph> one = passes::microBatchedGradients(forward, 1);
    REQUIRE(one.ok());
    CHECK(ir::printGraph(*one) == ir::printGraph(full));
  }
}

TEST_CASE("micro-batching errors") {
  ir::Graph forward = forwardGraph("mlp", {{"batch", "6"}, {"depth", "2"}});
  Expected<ir::Graph> three = passes::microBatchedGradients(forward, 4);
  REQUIRE_FALSE(three.ok());
  CHECK(three.error().message.find("a batch of 6 examples cannot be split into 4 equal micro-batches (divisors: 1, 2, 3, 6)") !=
        std::string::npos);
  CHECK(passes::microBatchedGradients(forward, 3).ok());
  Expected<ir::Graph> zero = passes::microBatchedGradients(forward, 0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().message.find("at least 1") != std::string::npos);

  ir::Graph joint = passes::remat::cloneGraph(forward);
  REQUIRE(passes::Autodiff().run(joint).ok());
  Expected<ir::Graph> twice = passes::microBatchedGradients(joint, 2);
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message.find("it takes a forward graph") != std::string::npos);

  CHECK(passes::microBatchCandidates(forward) == std::vector<int>{1, 2, 3, 6});
}

namespace {

// x[batch, seq, d] mixed along seq by one [seq, seq] matrix shared by every example.
const char* kMixSpec =
    "model: mix\n"
    "dims: {batch: 6, seq: 5, d: 4}\n"
    "inputs:\n"
    "  x:   {shape: [batch, seq, d]}\n"
    "  mix: {shape: [seq, seq], batched: false}\n"
    "  y:   {shape: [batch, seq, d]}\n"
    "layers:\n"
    "  - {op: matmul, inputs: [mix, x]}\n"
    "  - {op: linear, name: fc, out: d}\n"
    "loss: {op: mse, input: _, target: y}\n";

ir::Graph mixGraph(const std::string& text = kMixSpec) {
  frontend::SpecResult r = frontend::compileSpec(text, "mix.yaml");
  REQUIRE(r.ok());
  return std::move(*r.graph);
}

}  // namespace

TEST_CASE("an input marked batched: false is read whole by every micro-batch, never sliced") {
  ir::Graph forward = mixGraph();
  const ir::Value* mix = forward.findNamed("mix");
  REQUIRE(mix);
  CHECK_FALSE(mix->isBatchedInput());
  CHECK(forward.findNamed("x")->isBatchedInput());
  CHECK(*passes::batchSize(forward) == 6);  // the batched inputs' 6, not mix's 5
  CHECK(passes::microBatchCandidates(forward) == std::vector<int>{1, 2, 3, 6});

  Expected<ir::Graph> g = passes::microBatchedGradients(forward, 3);
  REQUIRE_MESSAGE(g.ok(), g.error().message);
  int slicesOfX = 0, readersOfMix = 0;
  for (const auto& n : g->nodes()) {
    if (n->opName() == "slice") {
      CHECK(n->operand(0)->name() != "mix");
      slicesOfX += n->operand(0)->name() == "x";
    }
    for (const ir::Value* v : n->operands()) readersOfMix += v->name() == "mix";
  }
  CHECK(slicesOfX == 3);
  CHECK(readersOfMix >= 3);  // each micro-batch's forward (and backward) reads the whole matrix
  CHECK(g->findNamed("mix")->type().shape == ir::Shape{5, 5});
  CHECK_FALSE(g->findNamed("mix")->isBatchedInput());

  // The IR text keeps the mark, so artifacts and `gradc opt` see it too.
  const std::string text = ir::printGraph(forward);
  CHECK(text.find("input %mix : f32[5, 5] {batched = false}") != std::string::npos);

  // Without the mark, the inputs disagree, and the message says what to write.
  std::string unmarked = kMixSpec;
  unmarked.replace(unmarked.find(", batched: false"), 16, "");
  Expected<std::int64_t> batch = passes::batchSize(mixGraph(unmarked));
  REQUIRE_FALSE(batch.ok());
  CHECK(batch.error().message.find("inputs disagree on the batch: 'x' has 6 examples, 'mix' has 5") != std::string::npos);
  CHECK(batch.error().message.find("batched: false") != std::string::npos);
}

TEST_CASE("the training-step planner picks micro-batches and remat together") {
  ir::Graph forward = forwardGraph("gpt-mini", {{"batch", "8"}, {"seq", "32"}, {"vocab", "32"}, {"d_model", "16"},
                                                {"heads", "2"}, {"layers", "2"}});
  // No budget: one micro-batch, no recompute.
  passes::TrainingPlanOptions loose;
  loose.microBatches = 0;
  Expected<passes::TrainingPlan> plain = passes::chooseTrainingPlan(forward, loose);
  REQUIRE(plain.ok());
  CHECK(plain->report.config.microBatches == 1);
  CHECK(plain->report.recomputeFlops == 0);
  const std::int64_t full = plain->report.predictedPeakBytes;

  // The smallest peak one micro-batch reaches with any remat plan.
  passes::TrainingPlanOptions one;
  one.remat = passes::RematStrategy::Auto;
  one.plan.budgetBytes = std::int64_t{1};
  Expected<passes::TrainingPlan> floor = passes::chooseTrainingPlan(forward, one);
  REQUIRE_FALSE(floor.ok());
  const std::string message = floor.error().message;
  REQUIRE(floor.error().kind == ErrorKind::InfeasibleBudget);
  REQUIRE(floor.error().smallestFeasibleBytes > 0);

  // A budget between the full-batch peak and that floor: auto prefers micro-batches (no
  // recompute) over recomputing, and fits.
  passes::TrainingPlanOptions tight;
  tight.microBatches = 0;
  std::int64_t previous = full;
  std::set<int> counts;
  for (int i = 1; i <= 8; ++i) {
    const std::int64_t budget = full - full * i / 16;
    tight.remat = passes::RematStrategy::Auto;
    tight.plan.budgetBytes = budget;
    Expected<passes::TrainingPlan> c = passes::chooseTrainingPlan(forward, tight);
    if (!c.ok()) {
      CHECK(c.error().message.find("the smallest feasible budget is") != std::string::npos);
      continue;
    }
    CAPTURE(budget);
    CHECK(c->report.predictedPeakBytes <= budget);
    CHECK(c->report.predictedPeakBytes <= previous);  // monotone
    CHECK(passes::scheduledPeakBytes(c->graph) == c->report.predictedPeakBytes);
    CHECK(ir::verify(c->graph).ok());
    previous = c->report.predictedPeakBytes;
    counts.insert(c->report.config.microBatches);
    MESSAGE("budget " << budget << ": k=" << c->report.config.microBatches << " " << c->report.plan << ", peak "
                      << c->report.predictedPeakBytes << ", recompute " << c->report.recomputePercent() << "%");
  }
  CHECK(counts.size() >= 2);  // the count grows as the budget shrinks

  // The planner stops building counts once one fits without recompute; the choice is the
  // same as selecting over every count's graph.
  for (std::int64_t budget : {full * 3 / 4, full * 2 / 5}) {
    tight.remat = passes::RematStrategy::Auto;
    tight.plan.budgetBytes = budget;
    Expected<passes::TrainingPlan> quick = passes::chooseTrainingPlan(forward, tight);
    std::vector<ir::Graph> graphs;
    std::vector<int> ks = passes::microBatchCandidates(forward);
    for (int k : ks) {
      Expected<ir::Graph> g = passes::microBatchedGradients(forward, k);
      REQUIRE(g.ok());
      REQUIRE(passes::OptimizerPass().run(*g).ok());
      REQUIRE(passes::DeadCodeElimination().run(*g).ok());
      graphs.push_back(std::move(*g));
    }
    std::vector<passes::PlanCandidate> views;
    for (size_t i = 0; i < graphs.size(); ++i) views.push_back(passes::PlanCandidate{&graphs[i], ks[i]});
    Expected<passes::PlanSelection> all = passes::selectTrainingPlan(views, tight.remat, tight.plan);
    REQUIRE(quick.ok() == all.ok());
    if (!quick.ok()) continue;
    CHECK(quick->report.config.microBatches == ks[all->graph]);
    CHECK(quick->report.predictedPeakBytes == all->report.predictedPeakBytes);
    CHECK(quick->report.recomputeFlops == all->report.recomputeFlops);
  }

  // A fixed count is honoured.
  passes::TrainingPlanOptions fixed;
  fixed.microBatches = 4;
  Expected<passes::TrainingPlan> four = passes::chooseTrainingPlan(forward, fixed);
  REQUIRE(four.ok());
  CHECK(four->report.config.microBatches == 4);
}

namespace {

// x[batch, d] reduced by `reduction` (a spec layer), compared with an unbatched target.
ir::Graph reductionGraph(const std::string& reduction, const std::string& targetShape, bool targetBatched = false) {
  const std::string text = "model: pool\n"
                           "dims: {batch: 6, d: 4}\n"
                           "inputs:\n"
                           "  x: {shape: [batch, d]}\n"
                           "  y: {shape: " + targetShape + (targetBatched ? "" : ", batched: false") + "}\n"
                           "layers:\n"
                           "  - {op: linear, name: fc, out: d, input: x}\n"
                           "  - " + reduction + "\n"
                           "loss: {op: mse, input: _, target: y}\n";
  frontend::SpecResult r = frontend::compileSpec(text, "pool.yaml");
  REQUIRE_MESSAGE(r.ok(), (r.diagnostics.empty() ? std::string() : r.diagnostics[0].message));
  return std::move(*r.graph);
}

}  // namespace

TEST_CASE("a reduction over the batch axis is never split: refused for an explicit count, whole under auto") {
  for (const std::string reduction : {"{op: mean, dims: [0]}", "{op: sum, dims: [-2]}", "{op: mean}", "{op: sum}"}) {
    CAPTURE(reduction);
    const bool everyAxis = reduction.find("dims") == std::string::npos;
    ir::Graph forward = reductionGraph(reduction, everyAxis ? "[]" : "[d]");
    const ir::Node* mixing = passes::batchMixingNode(forward);
    REQUIRE(mixing);
    CHECK((mixing->opName() == "mean" || mixing->opName() == "sum"));
    CHECK(passes::microBatchCandidates(forward) == std::vector<int>{1});
    for (int k : {2, 3}) {
      Expected<ir::Graph> split = passes::microBatchedGradients(forward, k);
      REQUIRE_FALSE(split.ok());
      CHECK(split.error().message.find("works along the batch axis (it mixes examples)") != std::string::npos);
    }
    Expected<ir::Graph> ranks = passes::rebatchForward(forward, 6, 2, "data parallelism");
    REQUIRE_FALSE(ranks.ok());
    CHECK(ranks.error().message.rfind("data parallelism: node", 0) == 0);
    CHECK(passes::microBatchedGradients(forward, 1).ok());
  }
  // Over the features only: every example on its own, split as usual.
  ir::Graph perExample = reductionGraph("{op: mean, dims: [1]}", "[batch]", /*targetBatched=*/true);
  CHECK_FALSE(passes::batchMixingNode(perExample));
  CHECK(passes::microBatchCandidates(perExample) == std::vector<int>{1, 2, 3, 6});
  Expected<ir::Graph> split = passes::microBatchedGradients(perExample, 3);
  CHECK_MESSAGE(split.ok(), (split.ok() ? "" : split.error().message));
}

TEST_CASE("sum and mean without dims reduce every axis, listed in the IR") {
  ir::Graph forward = reductionGraph("{op: sum}", "[]");
  const ir::Node* sum = nullptr;
  for (const auto& n : forward.nodes())
    if (n->opName() == "sum") sum = n.get();
  REQUIRE(sum);
  CHECK(*ir::getIntList(sum->attrs(), "dims") == std::vector<std::int64_t>{0, 1});
  CHECK(sum->result(0)->type().rank() == 0);
}
