// Remat and micro-batching change how a training step runs, never what it computes.
//
// 1. Remat on vs off: on every bundled model (reduced sizes, dropout on), the joint graph is
//    run by the executor as is and after the remat pass with every strategy, under a budget
//    that forces recomputation; same weights, inputs, seed and step. The loss and every
//    parameter gradient must be bit-identical (at::equal): recompute nodes are clones of
//    forward nodes reading identical values, and dropout redraws its mask from the same key.
//    One AdamW step is checked the same way (parameters and optimizer state after the step).
// 2. Micro-batching: k = 2 and 4 micro-batches against the full batch, dropout stripped (each
//    micro-batch draws its own masks, so with dropout only the distribution matches).
//    Tolerance: |micro - full| <= 1e-5 * max|full| + 1e-6 per tensor (fp32; the batch sum
//    is split into k partial sums, so the summation order differs). The largest relative
//    difference is printed. Remat on top of micro-batching is again bit-identical.
#include <ATen/ATen.h>

#include <set>
#include <string>
#include <vector>

#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/memory/liveness.h"
#include "passes/memory/step_graph.h"
#include "passes/micro_batch.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/remat.h"
#include "passes/remat_free_path.h"
#include "passes/strip_dropout.h"
#include "runtime/exec/executor.h"
#include "runtime/train/init.h"
#include "runtime/train/synthetic_inputs.h"
#include "tests/bundled_model.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc;
using passes::RematStrategy;

namespace {

constexpr std::uint64_t kSeed = 5;
constexpr std::int64_t kStep = 2;

struct Model {
  std::string name;
  std::vector<std::pair<std::string, std::string>> sets;
};

std::vector<Model> models() {
  return {
      {"mlp", {{"batch", "64"}, {"features", "6"}, {"hidden", "24"}, {"outputs", "3"}, {"depth", "5"}}},
      {"gpt-mini", {{"batch", "4"}, {"seq", "16"}, {"vocab", "32"}, {"d_model", "16"}, {"heads", "2"}, {"layers", "3"}}},
      {"lstm-lm", {{"batch", "8"}, {"seq", "12"}, {"vocab", "16"}, {"embed", "8"}, {"hidden", "8"}}},
      {"lm-seed", {{"batch", "4"}, {"seq", "8"}, {"vocab", "24"}, {"d_model", "12"}, {"heads", "2"}, {"layers", "2"}}},
      // The transformer models people train: tied weights, rope, grouped-query attention,
      // RMSNorm, SwiGLU, the masked-LM loss.
      {"gpt2", {{"batch", "4"}, {"context", "12"}, {"seq", "8"}, {"vocab", "40"}, {"d_model", "16"}, {"heads", "2"},
                {"layers", "2"}}},
      {"llama", {{"batch", "4"}, {"seq", "8"}, {"vocab", "40"}, {"d_model", "16"}, {"heads", "4"}, {"kv_heads", "2"},
                 {"layers", "2"}, {"d_ff", "24"}}},
      {"bert-mlm", {{"batch", "4"}, {"seq", "8"}, {"vocab", "40"}, {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}}},
      // Convolutions, pooling and batch norm with running statistics (updated in place by the
      // forward: a recomputed batch_norm must not update them again).
      {"resnet18-cifar", {{"batch", "4"}, {"image", "8"}, {"width", "4"}}},
      {"resnet-deep", {{"batch", "2"}, {"image", "8"}, {"depth", "29"}, {"width", "2"}}},
  };
}

// Models whose batch_norm normalises with batch statistics: splitting the batch changes them.
bool hasBatchStatistics(const ir::Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op().batchStatistics) return true;
  return false;
}

ir::Graph forwardGraph(const Model& m) {
  return testing::compileBundledModel(m.name, m.sets);
}

void runPasses(ir::Graph& g, bool optimizer) {
  passes::PassManager pm;
  pm.add<passes::Autodiff>();
  if (optimizer) pm.add<passes::OptimizerPass>();
  pm.add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(g);
  REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));
}

struct Run {
  runtime::TensorMap outputs;
  runtime::TensorMap state;  // parameters (and optimizer state) after the run
};

// Inputs drawn for one graph of a model and fed to all of them: synthetic index inputs take
// their range from the op that reads them (an embedding's rows), which a micro-batched graph
// reaches through a slice. The optimizer's `step` is the step number, as the trainer feeds it.
runtime::TensorMap inputsFor(const ir::Graph& g) {
  runtime::TensorMap inputs;
  for (const auto& v : g.inputs())
    inputs.emplace(v->name(), v->name() == "step" ? at::scalar_tensor(kStep, at::kLong)
                                                  : runtime::syntheticInput(*v, kSeed, kStep));
  return inputs;
}

// The same initial weights (from the graph's parameters by name) and inputs for every graph
// of a model.
Run execute(const ir::Graph& g, const runtime::TensorMap& initial, const runtime::TensorMap& inputs) {
  runtime::TensorMap state;
  for (const auto& p : g.params()) {
    auto it = initial.find(p->name());
    REQUIRE_MESSAGE(it != initial.end(), p->name());
    state.emplace(p->name(), it->second.clone());
  }
  Expected<runtime::Executor> exec = runtime::Executor::create(g);
  REQUIRE_MESSAGE(exec.ok(), (exec.ok() ? "" : exec.error().message));
  Expected<runtime::TensorMap> out = exec->run(inputs, state, {kSeed, kStep});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  return Run{std::move(*out), std::move(state)};
}

runtime::TensorMap initialState(const ir::Graph& g) {
  Expected<runtime::TensorMap> init = runtime::initParameters(g, kSeed);
  REQUIRE(init.ok());
  return *init;
}

// A budget halfway between what no remat needs and the smallest peak the strategy reaches
// (that peak itself when it is not below no remat's): recompute is forced, and a plan exists.
std::int64_t forcingBudget(const ir::Graph& joint, RematStrategy s) {
  ir::Graph probe = passes::remat::cloneGraph(joint);
  passes::RematPass lowest(s == RematStrategy::Auto ? RematStrategy::MemoryPoor : s);
  REQUIRE(lowest.run(probe).ok());
  const std::int64_t none = passes::analyzeLiveness(joint).peakBytes;
  const std::int64_t low = lowest.report().predictedPeakBytes;
  return low < none ? (none + low) / 2 : low;
}

int recomputeNodes(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->phase() == ir::Phase::recompute ? 1 : 0;
  return n;
}

double relDiff(const at::Tensor& ours, const at::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  const double diff = (ours - ref).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// A model's joint graph, its initial weights and inputs, and its outputs without remat.
struct Baseline {
  ir::Graph joint;
  runtime::TensorMap initial, inputs;
  Run reference;
};
Baseline baseline(const Model& m, bool optimizer) {
  Baseline b{forwardGraph(m), {}, {}, {}};
  runPasses(b.joint, optimizer);
  b.initial = initialState(b.joint);
  b.inputs = inputsFor(b.joint);
  b.reference = execute(b.joint, b.initial, b.inputs);
  return b;
}

}  // namespace

TEST_CASE("remat on vs off: bit-identical losses and gradients on every bundled model") {
  for (const Model& m : models()) {
    CAPTURE(m.name);
    const Baseline base = baseline(m, /*optimizer=*/false);
    const ir::Graph& joint = base.joint;
    const runtime::TensorMap& initial = base.initial;
    const runtime::TensorMap& inputs = base.inputs;
    const Run& reference = base.reference;
    for (RematStrategy s : {RematStrategy::Sqrt, RematStrategy::Chain, RematStrategy::MemoryPoor,
                            RematStrategy::Selective, RematStrategy::Auto}) {
      CAPTURE(passes::rematStrategyName(s));
      ir::Graph g = passes::remat::cloneGraph(joint);
      passes::RematPass pass(s, passes::PlanOptions{forcingBudget(joint, s)});
      Expected<bool> ran = pass.run(g);
      REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));
      const Run run = execute(g, initial, inputs);
      REQUIRE(run.outputs.size() == reference.outputs.size());
      int compared = 0;
      for (const auto& [name, tensor] : reference.outputs) {
        CAPTURE(name);
        CHECK(at::equal(run.outputs.at(name), tensor));
        ++compared;
      }
      // The state after the step: running statistics updated exactly once, with the same bits.
      for (const auto& [name, tensor] : reference.state) {
        CAPTURE(name);
        CHECK(at::equal(run.state.at(name), tensor));
        if (name.ends_with(".num_batches_tracked")) CHECK(run.state.at(name).item<std::int64_t>() == 1);
        if (name.ends_with(".running_mean")) CHECK_FALSE(at::equal(tensor, initial.at(name)));
        ++compared;
      }
      MESSAGE(m.name << " " << passes::rematStrategyName(s) << ": " << recomputeNodes(g) << " recompute nodes ("
                     << passes::rematStrategyName(pass.report().chosen) << "), " << compared
                     << " outputs bit-identical");
    }
  }
}

TEST_CASE("remat on vs off: one AdamW step leaves bit-identical parameters and optimizer state") {
  // gpt-mini (dropout) and lstm-lm with chain; resnet18-cifar (running statistics) with sqrt.
  for (const auto& [m, strategy] : {std::pair{models()[1], RematStrategy::Chain}, std::pair{models()[2], RematStrategy::Chain},
                                    std::pair{models()[7], RematStrategy::Sqrt}}) {
    CAPTURE(m.name);
    const Baseline base = baseline(m, /*optimizer=*/true);
    const ir::Graph& joint = base.joint;
    const runtime::TensorMap& initial = base.initial;
    const runtime::TensorMap& inputs = base.inputs;
    const Run& reference = base.reference;
    ir::Graph g = passes::remat::cloneGraph(joint);
    passes::RematPass pass(strategy, passes::PlanOptions{forcingBudget(joint, strategy)});
    REQUIRE(pass.run(g).ok());
    REQUIRE(recomputeNodes(g) > 0);
    const Run run = execute(g, initial, inputs);
    CHECK(at::equal(run.outputs.at("loss"), reference.outputs.at("loss")));
    for (const auto& [name, tensor] : reference.state) {
      CAPTURE(name);
      CHECK(at::equal(run.state.at(name), tensor));
    }
  }
}

TEST_CASE("micro-batching equals the full batch within float tolerance; remat on top is bit-identical") {
  for (const Model& m : models()) {
    CAPTURE(m.name);
    ir::Graph forward = forwardGraph(m);
    if (hasBatchStatistics(forward)) continue;  // per-micro-batch statistics differ by design
    REQUIRE(passes::StripDropout().run(forward).ok());
    ir::Graph full = passes::remat::cloneGraph(forward);
    runPasses(full, /*optimizer=*/false);
    const runtime::TensorMap initial = initialState(full);
    const runtime::TensorMap inputs = inputsFor(full);
    const Run reference = execute(full, initial, inputs);
    for (int k : {2, 4}) {
      CAPTURE(k);
      Expected<ir::Graph> micro = passes::microBatchedGradients(forward, k);
      REQUIRE_MESSAGE(micro.ok(), (micro.ok() ? "" : micro.error().message));
      REQUIRE(passes::DeadCodeElimination().run(*micro).ok());
      const Run run = execute(*micro, initial, inputs);
      double worst = 0;
      std::string worstName;
      for (const auto& [name, tensor] : reference.outputs) {
        CAPTURE(name);
        const at::Tensor& ours = run.outputs.at(name);
        const double scale = tensor.abs().max().item<double>();
        const double diff = (ours - tensor).abs().max().item<double>();
        CHECK(diff <= 1e-5 * scale + 1e-6);
        if (relDiff(ours, tensor) >= worst) {
          worst = relDiff(ours, tensor);
          worstName = name;
        }
      }
      MESSAGE(m.name << " k=" << k << ": worst max|diff|/max|full| = " << worst << " (" << worstName << ")");

      // Remat on the micro-batched step changes nothing.
      ir::Graph rematted = passes::remat::cloneGraph(*micro);
      passes::RematPass pass(RematStrategy::Chain, passes::PlanOptions{forcingBudget(*micro, RematStrategy::Chain)});
      REQUIRE(pass.run(rematted).ok());
      const Run again = execute(rematted, initial, inputs);
      for (const auto& [name, tensor] : run.outputs) {
        CAPTURE(name);
        CHECK(at::equal(again.outputs.at(name), tensor));
      }
    }
  }
}

TEST_CASE("micro-batching with dropout: runs, and every micro-batch draws its own masks") {
  Model m = models()[3];  // lm-seed: embedding, attention and residual dropout
  ir::Graph forward = forwardGraph(m);
  Expected<ir::Graph> micro = passes::microBatchedGradients(forward, 2);
  REQUIRE(micro.ok());
  ir::Graph full = passes::remat::cloneGraph(forward);
  runPasses(full, false);
  const runtime::TensorMap initial = initialState(*micro);
  const runtime::TensorMap inputs = inputsFor(full);
  const Run a = execute(*micro, initial, inputs);
  const Run b = execute(*micro, initial, inputs);
  CHECK(at::equal(a.outputs.at("loss"), b.outputs.at("loss")));  // reproducible
  const Run f = execute(full, initial, inputs);
  MESSAGE("lm-seed with dropout: loss full batch " << f.outputs.at("loss").item<double>() << ", 2 micro-batches "
                                                   << a.outputs.at("loss").item<double>());
  // Different masks than the full batch: close in value (same distribution), not equal.
  CHECK_FALSE(at::equal(a.outputs.at("loss"), f.outputs.at("loss")));
}


namespace {
// A proposal's rewrite applied to g (the baseline's joint graph) computes the baseline's
// outputs bit for bit; g is restored after.
void checkRewriteBitIdentical(ir::Graph& g, const passes::RewritePlan& plan, const Baseline& base) {
  const passes::remat::AppliedRewrite applied = passes::remat::applyRewrite(g, plan);
  const Run run = execute(g, base.initial, base.inputs);
  for (const auto& [name, tensor] : base.reference.outputs) {
    CAPTURE(name);
    CHECK(at::equal(run.outputs.at(name), tensor));
  }
  passes::remat::undoRewrite(g, applied);
}
}  // namespace

// Short chains get every segment schedule and every memory-poor prefix as proposals
// (passes/remat_strategies.h), among them schedules the chain model cannot express (a boundary
// recomputed for the stored stage that reads it): each one, applied as the rewrite, computes
// bit-identical outputs.
TEST_CASE("remat on vs off: every segment schedule and memory-poor prefix of a short chain is bit-identical") {
  for (const Model& m : {Model{"mlp", {{"batch", "16"}, {"features", "6"}, {"hidden", "12"}, {"outputs", "3"}, {"depth", "4"}}},
                         Model{"lstm-lm", {{"batch", "4"}, {"seq", "3"}, {"vocab", "8"}, {"embed", "4"}, {"hidden", "4"}}}}) {
    CAPTURE(m.name);
    const Baseline base = baseline(m, /*optimizer=*/false);
    ir::Graph g = passes::remat::cloneGraph(base.joint);
    Expected<passes::remat::Analysis> analysis = passes::remat::analyze(g);
    REQUIRE(analysis.ok());
    CAPTURE(analysis->episodes.at(0).model.size());
    int segmentSchedules = 0, withoutCheckpoint = 0, alternating = 0;
    for (const passes::remat::Candidate& c : passes::remat::candidates(*analysis, RematStrategy::Chain)) {
      if (c.description.find("chain: recompute stage") != 0 && c.description.find("chain: stages 0-") != 0) continue;
      CAPTURE(c.description);
      ++segmentSchedules;
      withoutCheckpoint += c.description.find("no checkpoint") != std::string::npos ? 1 : 0;
      alternating += c.description.find("every other stage") != std::string::npos ? 1 : 0;
      checkRewriteBitIdentical(g, passes::remat::planRewrite(*analysis, c), base);
    }
    CHECK(segmentSchedules > 10);
    CHECK(withoutCheckpoint > 0);
    CHECK(alternating > 0);  // memory-poor prefixes with every other later stage recomputed once
    MESSAGE(m.name << ": " << segmentSchedules << " segment schedules (" << withoutCheckpoint
                   << " without a checkpoint, " << alternating << " alternating after a memory-poor prefix), all bit-identical");
  }
}

// Chain schedules with selective recompute inside the stages they store (recompute inside a
// transformer block: its cheap values from its kept matmul outputs) are bit-identical too, on
// every transformer model and with dropout on.
TEST_CASE("remat on vs off: chain schedules that also recompute cheap values inside stored stages are bit-identical") {
  int checked = 0;
  for (const Model& m : models()) {
    if (m.name != "gpt-mini" && m.name != "gpt2" && m.name != "llama" && m.name != "bert-mlm") continue;
    CAPTURE(m.name);
    const Baseline base = baseline(m, /*optimizer=*/false);
    ir::Graph g = passes::remat::cloneGraph(base.joint);
    Expected<passes::remat::Analysis> analysis = passes::remat::analyze(g);
    REQUIRE(analysis.ok());
    int mine = 0;
    for (const passes::remat::Candidate& c : passes::remat::candidates(*analysis, RematStrategy::Chain)) {
      if (c.description.find("inside stored stages") == std::string::npos) continue;
      CAPTURE(c.description);
      const passes::RewritePlan plan = passes::remat::planRewrite(*analysis, c);
      CHECK(!plan.clones.empty());
      checkRewriteBitIdentical(g, plan, base);
      ++mine;
    }
    CHECK(mine > 0);
    checked += mine;
  }
  MESSAGE(checked << " chain schedules with recompute inside stored stages, all bit-identical");
}

// Free recompute (cheap values recomputed only from what the backward holds anyway: embedding
// lookups, zero states, stacks, layer norms of a residual stream, the prefix's values and stage
// boundaries included), alone at each tier and inside the stored stages of chain schedules, is
// bit-identical on every bundled model, dropout included.
TEST_CASE("remat on vs off: free recompute, alone at every tier and inside chain schedules, is bit-identical") {
  int checked = 0;
  std::set<std::string> modelsWithFree;
  for (const Model& m : models()) {
    CAPTURE(m.name);
    const Baseline base = baseline(m, /*optimizer=*/false);
    ir::Graph g = passes::remat::cloneGraph(base.joint);
    Expected<passes::remat::Analysis> analysis = passes::remat::analyze(g);
    REQUIRE(analysis.ok());
    const passes::StepFacts facts(g, passes::analyzeStorage(g));  // the free-recompute path included
    for (const passes::remat::Candidate& c : passes::remat::candidatesWithFreePath(*analysis, RematStrategy::Auto, &facts)) {
      const bool free = c.description.find("from what the backward keeps anyway") != std::string::npos ||
                        c.description.find("free values inside stored stages") != std::string::npos;
      if (!free) continue;
      CAPTURE(c.description);
      const passes::RewritePlan plan = passes::remat::planRewrite(*analysis, c);
      CHECK(!plan.clones.empty());
      checkRewriteBitIdentical(g, plan, base);
      modelsWithFree.insert(m.name);
      ++checked;
    }
  }
  // The models whose step has values free recompute drops and selective keeps.
  CHECK(modelsWithFree.count("lstm-lm") == 1);
  CHECK(modelsWithFree.count("gpt-mini") == 1);
  MESSAGE(checked << " free-recompute proposals on " << modelsWithFree.size() << " models, all bit-identical");
}
