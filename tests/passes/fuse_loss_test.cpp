// Fusing the LM head into the loss (passes/fuse_loss.h): the rewrite, where it does not apply,
// and the planner's choice of whether and how finely to chunk under a budget. Numerical
// equality with the unfused loss is checked by tests/runtime/fused_loss_test.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/bundled_model.h"
#include "frontend/spec.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/schedule.h"
#include "passes/autodiff.h"
#include "passes/data_parallel.h"
#include "passes/fuse_loss.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "passes/plan/training_planner.h"

using namespace gradc;
using passes::LossChunking;

namespace {

int countOp(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->opName() == op;
  return n;
}

// Logits dominate: vocab 4096 over 8 x 64 tokens and 32 features (8 MiB of f32 logits).
const testing::DimOverrides kWideVocab{{"batch", "8"},   {"seq", "64"},   {"vocab", "4096"},
                                       {"d_model", "32"}, {"heads", "2"}, {"layers", "2"}};

passes::TrainingPlanOptions planOptions(std::optional<std::int64_t> budget, LossChunking chunking) {
  passes::TrainingPlanOptions o;
  o.plan.budgetBytes = budget;
  o.remat = budget ? passes::RematStrategy::Auto : passes::RematStrategy::None;
  o.lossChunks = chunking;
  return o;
}

const LossChunking kAuto{LossChunking::Mode::Auto, 0};
const LossChunking kOff{LossChunking::Mode::Off, 0};
LossChunking fixed(int k) { return {LossChunking::Mode::Fixed, k}; }

std::int64_t totalRecompute(const passes::TrainingPlanReport& r) { return r.recomputeFlops; }

}  // namespace

TEST_CASE("fuse-loss: the LM head and cross_entropy become one node, which also gives their gradients") {
  for (const std::string model : {"gpt-mini", "lm-seed", "lstm-lm"}) {
    CAPTURE(model);
    ir::Graph g = testing::compileBundledModel(model);
    const int linears = countOp(g, "linear");
    REQUIRE(passes::countFusableLosses(g) == 1);
    Expected<int> fused = passes::fuseLinearCrossEntropy(g, 5);
    REQUIRE(fused.ok());
    CHECK(*fused == 1);
    CHECK(countOp(g, "cross_entropy") == 0);
    CHECK(countOp(g, "linear") == linears - 1);
    CHECK(countOp(g, "linear_cross_entropy") == 1);
    CHECK(passes::lossChunksOf(g) == 5);
    CHECK(ir::verify(g).ok());
    CHECK(g.findOutput("loss")->producer()->opName() == "linear_cross_entropy");
    REQUIRE(passes::Autodiff().run(g).ok());
    CHECK(countOp(g, "cross_entropy_backward") == 0);
    // The loss is the graph's loss (upstream gradient 1): the fused node's gradient results are
    // the LM head's gradients, with no copy.
    int direct = 0, fusedOperands = 0;
    for (const ir::GraphOutput& o : g.outputs())
      if (o.name.rfind("grad.", 0) == 0 && o.value->producer() &&
          o.value->producer()->opName() == "linear_cross_entropy") {
        ++direct;
        fusedOperands = static_cast<int>(o.value->producer()->numOperands());
      }
    CHECK(direct == fusedOperands - 2);  // the head's weight, and its bias where it has one
    // The joint graph prints and parses back byte for byte.
    const std::string text = ir::printGraph(g);
    Expected<ir::Graph> parsed = ir::parseGraph(text, model);
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
    CHECK(ir::printGraph(*parsed) == text);
    passes::setLossChunks(g, 9);
    for (const auto& n : g.nodes())
      if (n->opName().rfind("linear_cross_entropy", 0) == 0) CHECK(*ir::getInt(n->attrs(), "chunks") == 9);
  }
}

TEST_CASE("fuse-loss: nothing to fuse is left alone, and a forced chunk count says why it cannot apply") {
  ir::Graph mlp = testing::compileBundledModel("mlp");  // an mse loss
  CHECK(passes::countFusableLosses(mlp) == 0);
  const std::string before = ir::printGraph(mlp);
  Expected<int> n = passes::fuseLinearCrossEntropy(mlp, 4);
  REQUIRE(n.ok());
  CHECK(*n == 0);
  CHECK(ir::printGraph(mlp) == before);
  Expected<passes::TrainingPlan> forced = passes::chooseTrainingPlan(mlp, planOptions(std::nullopt, fixed(4)));
  REQUIRE_FALSE(forced.ok());
  CHECK(forced.error().message.find("the loss cannot be fused: the graph has no cross_entropy loss") !=
        std::string::npos);
  // A cross_entropy the fused kernel does not cover: the message names the reason.
  for (const std::string attr : {"label_smoothing: 0.1", "ignore_index: 0"}) {
    frontend::SpecResult r = frontend::compileSpec(
        "model: lm\ndims: {batch: 2, seq: 4, vocab: 8, d: 4}\ninputs:\n"
        "  tokens: {shape: [batch, seq], dtype: i64}\n  targets: {shape: [batch, seq], dtype: i64}\n"
        "layers:\n  - {op: embedding, name: wte, input: tokens, num: vocab, dim: d}\n"
        "  - {op: linear, name: head, out: vocab}\n"
        "loss: {op: cross_entropy, target: targets, " + attr + "}\n",
        "lm.yaml");
    REQUIRE(r.ok());
    Expected<passes::TrainingPlan> smoothed = passes::chooseTrainingPlan(*r.graph, planOptions(std::nullopt, fixed(2)));
    REQUIRE_FALSE(smoothed.ok());
    const std::string name = attr.substr(0, attr.find(':'));
    CHECK_MESSAGE(smoothed.error().message.find("its cross_entropy (loss) has " + name) != std::string::npos,
                  smoothed.error().message);
  }
  // Auto on a model without the pattern plans as before.
  CHECK(passes::chooseTrainingPlan(mlp, planOptions(std::nullopt, kAuto)).ok());

  // The gather placement (DataParallel's baseline) gathers the logits: nothing matches.
  ir::Graph gpt = testing::compileBundledModel("gpt-mini", kWideVocab);
  passes::DataParallelOptions gather{2, 0, passes::LossPlacement::Gather};
  Expected<ir::Graph> shard = passes::partitionForward(gpt, gather);
  REQUIRE(shard.ok());
  CHECK(passes::countFusableLosses(*shard) == 0);
  passes::TrainingPlanOptions o = planOptions(std::nullopt, fixed(4));
  o.dataParallel = gather;
  Expected<passes::TrainingPlan> refused = passes::chooseTrainingPlan(*shard, o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("--loss-placement local") != std::string::npos);

  // A logits value read twice (here: also a graph output) is not fused.
  Expected<ir::Graph> twice = ir::parseGraph(R"(graph g
  input %x : f32[4, 8]
  input %y : i64[4]
  param %w : f32[6, 8]
  %0 = linear(%x, %w) : f32[4, 6] fwd
  %1 = cross_entropy(%0, %y) : f32[] fwd
  output loss = %1
  output logits = %0
)");
  REQUIRE(twice.ok());
  CHECK(passes::countFusableLosses(*twice) == 0);
}

TEST_CASE("fuse-loss: more chunks never need more memory; logits-dominated steps need much less") {
  ir::Graph forward = testing::compileBundledModel("gpt-mini", kWideVocab);
  Expected<passes::TrainingPlan> unfused = passes::chooseTrainingPlan(forward, planOptions(std::nullopt, kOff));
  REQUIRE(unfused.ok());
  const std::int64_t unfusedPeak = passes::scheduledPeakBytes(unfused->graph);
  Expected<passes::TrainingPlan> fused = passes::chooseTrainingPlan(forward, planOptions(std::nullopt, fixed(1)));
  REQUIRE(fused.ok());
  CHECK(fused->report.config.lossChunks == 1);
  std::vector<int> chunks = passes::lossChunkCandidates(fused->graph);
  REQUIRE(chunks == std::vector<int>{1, 2, 4, 8, 16, 32, 64});
  std::int64_t previous = unfusedPeak;
  for (int k : chunks) {
    CAPTURE(k);
    passes::setLossChunks(fused->graph, k);
    const std::int64_t peak = passes::scheduledPeakBytes(fused->graph);
    CHECK(peak <= previous);
    if (k <= 2) CHECK(peak < previous);  // while the chunk of logits is the peak's largest part
    previous = peak;
  }
  // The logits [512, 4096] f32 (8 MiB) and their gradient are gone: the fused step at 64 chunks
  // holds less than half of the unfused one.
  CHECK(previous * 2 < unfusedPeak);
  MESSAGE("gpt-mini vocab 4096: unfused peak " << unfusedPeak << " B, fused at 64 chunks " << previous << " B");
}

TEST_CASE("--loss-chunks auto: fused only under a budget, only when cheapest, with the fewest chunks that fit") {
  ir::Graph forward = testing::compileBundledModel("gpt-mini", kWideVocab);
  // No budget: nothing to fit, so no recompute and no fusion.
  Expected<passes::TrainingPlan> free = passes::chooseTrainingPlan(forward, planOptions(std::nullopt, kAuto));
  REQUIRE(free.ok());
  CHECK(free->report.config.lossChunks == 0);
  const std::int64_t fullPeak = free->report.predictedPeakBytes;
  // A budget the step fits as it is: still unfused.
  Expected<passes::TrainingPlan> roomy = passes::chooseTrainingPlan(forward, planOptions(fullPeak, kAuto));
  REQUIRE(roomy.ok());
  CHECK(roomy->report.config.lossChunks == 0);
  CHECK(totalRecompute(roomy->report) == 0);

  // The fused step at 64 chunks without remat, as a budget: no unfused plan reaches it.
  Expected<passes::TrainingPlan> finest = passes::chooseTrainingPlan(forward, planOptions(std::nullopt, fixed(64)));
  REQUIRE(finest.ok());
  const std::int64_t budget = passes::scheduledPeakBytes(finest->graph);
  Expected<passes::TrainingPlan> off = passes::chooseTrainingPlan(forward, planOptions(budget, kOff));
  REQUIRE_FALSE(off.ok());
  CHECK(off.error().message.find("no plan fits") != std::string::npos);
  Expected<passes::TrainingPlan> chosen = passes::chooseTrainingPlan(forward, planOptions(budget, kAuto));
  REQUIRE_MESSAGE(chosen.ok(), (chosen.ok() ? "" : chosen.error().message));
  CHECK(chosen->report.config.lossChunks > 0);
  CHECK(chosen->report.recomputeFlops == 0);
  CHECK(chosen->report.predictedPeakBytes <= budget);
  CHECK(passes::scheduledPeakBytes(chosen->graph) == chosen->report.predictedPeakBytes);
  CHECK(chosen->report.plan.find("fused loss in") != std::string::npos);
  // The fewest chunks that fit: half as many do not.
  if (chosen->report.config.lossChunks > 1) {
    Expected<passes::TrainingPlan> coarser =
        passes::chooseTrainingPlan(forward, planOptions(std::nullopt, fixed(chosen->report.config.lossChunks / 2)));
    REQUIRE(coarser.ok());
    CHECK(passes::scheduledPeakBytes(coarser->graph) > budget);
  }

  // A sweep from that budget to the full step: auto always fits, never recomputes more than the
  // unfused plan under the same budget (which auto also considers), and recomputes less as the
  // budget grows.
  std::int64_t previousRecompute = INT64_MAX;
  for (int i = 0; i <= 12; ++i) {
    const std::int64_t b = budget + (fullPeak - budget) * i / 12;
    CAPTURE(b);
    Expected<passes::TrainingPlan> a = passes::chooseTrainingPlan(forward, planOptions(b, kAuto));
    REQUIRE_MESSAGE(a.ok(), (a.ok() ? "" : a.error().message));
    CHECK(a->report.predictedPeakBytes <= b);
    const std::int64_t recompute = totalRecompute(a->report);
    CHECK(recompute <= previousRecompute);
    previousRecompute = recompute;
    if (Expected<passes::TrainingPlan> u = passes::chooseTrainingPlan(forward, planOptions(b, kOff)); u.ok())
      CHECK(recompute <= totalRecompute(u->report));
  }
  CHECK(previousRecompute == 0);

  // With micro-batching on auto too, the choice still fits and names what it chose.
  passes::TrainingPlanOptions withMicro = planOptions(budget, kAuto);
  withMicro.microBatches = 0;
  Expected<passes::TrainingPlan> micro = passes::chooseTrainingPlan(forward, withMicro);
  REQUIRE(micro.ok());
  CHECK(micro->report.predictedPeakBytes <= budget);
}

TEST_CASE("fused loss in the training pipeline: forced chunks, data-parallel local placement, micro-batches") {
  ir::Graph forward = testing::compileBundledModel("gpt-mini", kWideVocab);
  passes::TrainingPlanOptions o = planOptions(std::nullopt, fixed(6));
  o.optimizer = passes::OptimizerOptions{};
  o.microBatches = 2;
  Expected<passes::TrainingStepResult> step = passes::buildTrainingStepPipeline(forward, o);
  REQUIRE_MESSAGE(step.ok(), (step.ok() ? "" : step.error().message));
  CHECK(step->report.config.lossChunks == 6);
  CHECK(step->report.config.microBatches == 2);
  CHECK(countOp(step->graph, "linear_cross_entropy") == 2);
  CHECK(countOp(step->graph, "cross_entropy") == 0);
  CHECK(step->plan.peakBytes == passes::analyzeLiveness(step->graph).peakBytes);

  // Local placement: every rank fuses its own shard's loss.
  for (int rank : {0, 1}) {
    CAPTURE(rank);
    passes::TrainingPlanOptions p = planOptions(std::nullopt, fixed(4));
    p.optimizer = passes::OptimizerOptions{};
    p.dataParallel = passes::DataParallelOptions{2, rank, passes::LossPlacement::Local};
    Expected<passes::TrainingStepResult> r = passes::buildTrainingStepPipeline(forward, p);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
    CHECK(r->report.config.lossChunks == 4);
    CHECK(countOp(r->graph, "linear_cross_entropy") == 1);
    // The rank's loss is scaled by 1 / world: so are the fused node's gradients.
    for (const auto& n : r->graph.nodes())
      if (n->opName() == "linear_cross_entropy")
        for (size_t i = 1; i < n->numResults(); ++i) {
          REQUIRE(n->result(i)->uses().size() == 1);
          CHECK(n->result(i)->uses()[0].user->opName() == "mul");
        }
    // The shard's rows: 4 sequences of 64 tokens.
    for (const auto& n : r->graph.nodes())
      if (n->opName() == "linear_cross_entropy") CHECK(n->operand(2)->type().numel() == 256);
  }
}

TEST_CASE("--loss-chunks values") {
  CHECK(passes::parseLossChunks("auto")->mode == LossChunking::Mode::Auto);
  CHECK(passes::parseLossChunks("off")->mode == LossChunking::Mode::Off);
  Expected<LossChunking> k = passes::parseLossChunks("12");
  REQUIRE(k.ok());
  CHECK(k->mode == LossChunking::Mode::Fixed);
  CHECK(k->chunks == 12);
  for (const char* bad : {"0", "-3", "", "4x", "many", "99999999999"}) {
    CAPTURE(bad);
    Expected<LossChunking> r = passes::parseLossChunks(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("--loss-chunks") != std::string::npos);
  }
}
