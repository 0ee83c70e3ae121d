// Optimizer: text in, text out on a small graph (SGD with and without momentum, AdamW with
// clipping); every bundled model through autodiff + optimizer; the pipeline in a PassManager;
// error cases.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/spec.h"
#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
#include "tests/ir/test_util.h"

using namespace gradc;
using passes::OptimizerOptions;

namespace {

// A one-layer regression model, already differentiated by autodiff.
const char* kDifferentiated = R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[8, 3] fwd  # fc
  %1 = mse(%0, %y) : f32[] fwd  # loss
  %2 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %3 = mse_backward(%2, %0, %y) : f32[8, 3] bwd  # loss
  %4 = linear_weight_grad(%3, %x) : f32[3, 4] bwd  # fc
  %5 = sum_to(%3) {shape = [3]} : f32[3] bwd  # fc
  output loss = %1
  output grad.fc.weight = %4
  output grad.fc.bias = %5
)";

// The forward part of kDifferentiated: what the declarations and nodes %0..%5 print as.
const char* kPrefix = R"(  %0 = linear(%x, %fc.weight, %fc.bias) : f32[8, 3] fwd  # fc
  %1 = mse(%0, %y) : f32[] fwd  # loss
  %2 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %3 = mse_backward(%2, %0, %y) : f32[8, 3] bwd  # loss
  %4 = linear_weight_grad(%3, %x) : f32[3, 4] bwd  # fc
  %5 = sum_to(%3) {shape = [3]} : f32[3] bwd  # fc
)";

std::string runOptimizer(const std::string& text, const OptimizerOptions& options) {
  ir::Graph g = testing::parseOrFail(text);
  passes::OptimizerPass optimizer(options);
  Expected<bool> changed = optimizer.run(g);
  if (!changed) FAIL(changed.error().message);
  CHECK(*changed);
  Status verified = ir::verify(g);
  if (!verified) FAIL(verified.message());
  std::string printed = ir::printGraph(g);
  CHECK(ir::printGraph(testing::parseOrFail(printed)) == printed);
  // Every backward node feeds an update: dead-code elimination finds nothing to remove.
  passes::DeadCodeElimination dce;
  Expected<bool> removed = dce.run(g);
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);
  return printed;
}

std::string optimizerError(const std::string& text, const OptimizerOptions& options = {}) {
  ir::Graph g = testing::parseOrFail(text);
  passes::OptimizerPass optimizer(options);
  Expected<bool> changed = optimizer.run(g);
  REQUIRE_FALSE(changed.ok());
  return changed.error().message;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("optimizer: SGD with momentum adds one buffer and one sgd_step per parameter") {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::Sgd;
  o.lr = 0.1;
  o.minLr = 0.01;
  o.warmupSteps = 10;
  o.totalSteps = 100;
  std::string expected = std::string(R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  input %step : i64[]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  param %opt.momentum.fc.weight : f32[3, 4] {init = "zeros", of = "fc.weight", role = "opt_state"}
  param %opt.momentum.fc.bias : f32[3] {init = "zeros", of = "fc.bias", role = "opt_state"}
)") + kPrefix + R"(  %6 = lr_schedule(%step) {lr = 0.1, min_lr = 0.01, total_steps = 100, warmup_steps = 10} : f32[] opt  # optimizer
  %7 = full() {dtype = f32, shape = [], value = 1.0} : f32[] opt  # optimizer
  sgd_step(%fc.weight, %4, %6, %7, %opt.momentum.fc.weight) {momentum = 0.9, weight_decay = 0.0} : () opt  # optimizer
  sgd_step(%fc.bias, %5, %6, %7, %opt.momentum.fc.bias) {momentum = 0.9, weight_decay = 0.0} : () opt  # optimizer
  output loss = %1
  output lr = %6
)";
  CHECK(runOptimizer(kDifferentiated, o) == expected);
}

TEST_CASE("optimizer: plain SGD (momentum 0) has no buffer") {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::Sgd;
  o.momentum = 0.0;
  o.weightDecay = 5e-4;
  std::string expected = std::string(R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  input %step : i64[]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
)") + kPrefix + R"(  %6 = lr_schedule(%step) {lr = 0.001, min_lr = 1e-04, total_steps = 1, warmup_steps = 0} : f32[] opt  # optimizer
  %7 = full() {dtype = f32, shape = [], value = 1.0} : f32[] opt  # optimizer
  sgd_step(%fc.weight, %4, %6, %7) {momentum = 0.0, weight_decay = 5e-04} : () opt  # optimizer
  sgd_step(%fc.bias, %5, %6, %7) {momentum = 0.0, weight_decay = 5e-04} : () opt  # optimizer
  output loss = %1
  output lr = %6
)";
  CHECK(runOptimizer(kDifferentiated, o) == expected);
}

TEST_CASE("optimizer: AdamW with gradient clipping") {
  OptimizerOptions o;  // AdamW, PyTorch defaults
  o.clipNorm = 1.0;
  std::string expected = std::string(R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  input %step : i64[]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  param %opt.adam_m.fc.weight : f32[3, 4] {init = "zeros", of = "fc.weight", role = "opt_state"}
  param %opt.adam_v.fc.weight : f32[3, 4] {init = "zeros", of = "fc.weight", role = "opt_state"}
  param %opt.adam_m.fc.bias : f32[3] {init = "zeros", of = "fc.bias", role = "opt_state"}
  param %opt.adam_v.fc.bias : f32[3] {init = "zeros", of = "fc.bias", role = "opt_state"}
)") + kPrefix + R"(  %6 = lr_schedule(%step) {lr = 0.001, min_lr = 1e-04, total_steps = 1, warmup_steps = 0} : f32[] opt  # optimizer
  %7 = global_norm(%4, %5) : f32[] opt  # optimizer
  %8 = clip_coef(%7) {max_norm = 1.0} : f32[] opt  # optimizer
  adamw_step(%fc.weight, %4, %opt.adam_m.fc.weight, %opt.adam_v.fc.weight, %6, %step, %8) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, weight_decay = 0.01} : () opt  # optimizer
  adamw_step(%fc.bias, %5, %opt.adam_m.fc.bias, %opt.adam_v.fc.bias, %6, %step, %8) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, weight_decay = 0.01} : () opt  # optimizer
  output loss = %1
  output grad_norm = %7
  output lr = %6
)";
  CHECK(runOptimizer(kDifferentiated, o) == expected);
}

TEST_CASE("optimizer: decay groups leave weight decay off biases and norm weights; betas and eps as given") {
  OptimizerOptions o;
  o.weightDecay = 0.1;
  o.beta1 = 0.9;
  o.beta2 = 0.99;
  o.eps = 1e-6;
  o.decay = OptimizerOptions::DecayGroups::Matrices;
  const std::string printed = runOptimizer(kDifferentiated, o);
  CHECK(contains(printed, "adamw_step(%fc.weight, %4, %opt.adam_m.fc.weight, %opt.adam_v.fc.weight, %6, %step, %7) "
                          "{beta1 = 0.9, beta2 = 0.99, eps = 1e-06, weight_decay = 0.1}"));
  CHECK(contains(printed, "adamw_step(%fc.bias, %5, %opt.adam_m.fc.bias, %opt.adam_v.fc.bias, %6, %step, %7) "
                          "{beta1 = 0.9, beta2 = 0.99, eps = 1e-06, weight_decay = 0.0}"));
  o.decay = OptimizerOptions::DecayGroups::All;  // torch.optim.AdamW(model.parameters()): every parameter
  const std::string all = runOptimizer(kDifferentiated, o);
  CHECK(contains(all, "%opt.adam_v.fc.bias, %6, %step, %7) {beta1 = 0.9, beta2 = 0.99, eps = 1e-06, weight_decay = 0.1}"));
  o.kind = OptimizerOptions::Kind::Sgd;  // SGD's coupled decay follows the same groups
  o.decay = OptimizerOptions::DecayGroups::Matrices;
  const std::string sgd = runOptimizer(kDifferentiated, o);
  CHECK(contains(sgd, "sgd_step(%fc.weight, %4, %6, %7, %opt.momentum.fc.weight) {momentum = 0.9, weight_decay = 0.1}"));
  CHECK(contains(sgd, "sgd_step(%fc.bias, %5, %6, %7, %opt.momentum.fc.bias) {momentum = 0.9, weight_decay = 0.0}"));
}

namespace {

std::vector<std::filesystem::path> bundledModels() {
  std::vector<std::filesystem::path> specs;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(GRADC_SOURCE_DIR) / "models"))
    if (entry.path().extension() == ".yaml") specs.push_back(entry.path());
  std::sort(specs.begin(), specs.end());
  return specs;
}

ir::Graph compileModel(const std::filesystem::path& spec) {
  frontend::SpecResult result = frontend::compileSpecFile(spec.string());
  if (!result.ok()) {
    std::string message = "cannot compile " + spec.string();
    for (const frontend::Diagnostic& d : result.diagnostics) message += "\n" + d.message;
    FAIL(message);
  }
  return std::move(*result.graph);
}

void checkVerifiesAndRoundTrips(const ir::Graph& g) {
  Status verified = ir::verify(g);
  if (!verified) FAIL(verified.message());
  std::string printed = ir::printGraph(g);
  Expected<ir::Graph> parsed = ir::parseGraph(printed, "roundtrip.gir");
  if (!parsed) FAIL(parsed.error().message);
  CHECK(ir::printGraph(*parsed) == printed);
}

// After the optimizer: each model parameter is updated by exactly one step op, with its
// optimizer state, after every other use of it; every backward node feeds an update.
void checkOptimized(ir::Graph& g, const std::vector<std::string>& modelParams, const OptimizerOptions& o) {
  checkVerifiesAndRoundTrips(g);
  const char* stepOp = o.kind == OptimizerOptions::Kind::Sgd ? "sgd_step" : "adamw_step";
  std::unordered_map<const ir::Node*, size_t> position;
  for (size_t i = 0; i < g.numNodes(); ++i) position.emplace(g.nodes()[i].get(), i);
  std::map<std::string, int> updates;
  size_t laterUses = 0;  // uses of a parameter after its update
  for (const auto& n : g.nodes()) {
    if (n->op().sideEffects && n->opName() != "running_stats_update") {  // batch_norm's, in the forward
      REQUIRE(n->opName() == stepOp);
      CHECK(n->phase() == ir::Phase::opt);
      ++updates[n->operand(0)->name()];
      for (const ir::Use& u : n->operand(0)->uses()) laterUses += position.at(u.user) > position.at(n.get());
    }
  }
  CHECK(laterUses == 0);
  CHECK(updates.size() == modelParams.size());
  for (const std::string& p : modelParams) {
    CAPTURE(p);
    CHECK(updates[p] == 1);
    CHECK(g.findOutput("grad." + p) == nullptr);
    if (o.kind == OptimizerOptions::Kind::AdamW) {
      CHECK(g.findNamed("opt.adam_m." + p) != nullptr);
      CHECK(g.findNamed("opt.adam_v." + p) != nullptr);
    } else {
      CHECK(g.findNamed("opt.momentum." + p) != nullptr);
    }
  }
  size_t learned = 0;
  for (const auto& p : g.params()) learned += ir::isLearned(*p);
  CHECK(learned == modelParams.size());
  size_t optState = 0;
  for (const auto& p : g.params()) optState += ir::getString(p->attrs(), "role").value_or("") == "opt_state";
  CHECK(optState == modelParams.size() * (o.kind == OptimizerOptions::Kind::AdamW ? 2 : 1));
  CHECK(g.findOutput("loss") != nullptr);
  CHECK(g.findOutput("lr") != nullptr);
  CHECK((g.findOutput("grad_norm") != nullptr) == (o.clipNorm > 0));
  passes::DeadCodeElimination dce;
  Expected<bool> removed = dce.run(g);
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);
}

}  // namespace

TEST_CASE("every bundled model: autodiff, then optimizer (SGD and AdamW), verify and round-trip") {
  std::vector<std::filesystem::path> specs = bundledModels();
  REQUIRE_FALSE(specs.empty());
  for (const std::filesystem::path& spec : specs) {
    CAPTURE(spec.filename().string());
    ir::Graph forward = compileModel(spec);
    std::string forwardText = ir::printGraph(forward);
    std::vector<std::string> modelParams;
    for (const auto& p : forward.params())
      if (ir::isLearned(*p)) modelParams.push_back(p->name());  // running statistics get no gradient

    OptimizerOptions sgd;
    sgd.kind = OptimizerOptions::Kind::Sgd;
    OptimizerOptions adamw;
    adamw.clipNorm = 1.0;
    adamw.warmupSteps = 100;
    adamw.totalSteps = 1000;
    for (const OptimizerOptions& o : {sgd, adamw}) {
      ir::Graph g = testing::parseOrFail(forwardText);
      passes::Autodiff autodiff;
      Expected<bool> differentiated = autodiff.run(g);
      if (!differentiated) FAIL(differentiated.error().message);
      checkVerifiesAndRoundTrips(g);
      // One gradient per parameter, of its type; forward nodes untouched and first.
      CHECK(g.outputs().size() == forward.outputs().size() + modelParams.size());
      for (const auto& p : g.params()) {
        CAPTURE(p->name());
        ir::Value* grad = g.findOutput("grad." + p->name());
        if (!ir::isLearned(*p)) {
          CHECK(grad == nullptr);
          continue;
        }
        REQUIRE(grad != nullptr);
        CHECK(ir::toString(grad->type()) == ir::toString(p->type()));
        CHECK((grad->producer() && grad->producer()->phase() == ir::Phase::bwd));
      }
      size_t misplaced = 0;
      for (size_t i = 0; i < g.numNodes(); ++i)
        misplaced += (g.nodes()[i]->phase() == ir::Phase::fwd) != (i < forward.numNodes());
      CHECK(misplaced == 0);

      passes::OptimizerPass optimizer(o);
      Expected<bool> optimized = optimizer.run(g);
      if (!optimized) FAIL(optimized.error().message);
      checkOptimized(g, modelParams, o);
    }
  }
}

TEST_CASE("the pipeline autodiff, optimizer, dce is valid under the PassManager's verifier") {
  for (const std::filesystem::path& spec : bundledModels()) {
    CAPTURE(spec.filename().string());
    ir::Graph g = compileModel(spec);
    passes::PassManager pm;  // verifies after every changing pass
    for (const char* name : {"autodiff", "optimizer", "dce"}) {
      std::unique_ptr<passes::Pass> pass = passes::createPass(name);
      REQUIRE(pass != nullptr);
      CHECK(pass->name() == name);
      pm.add(std::move(pass));
    }
    Expected<bool> changed = pm.run(g);
    if (!changed) FAIL(changed.error().message);
    CHECK(*changed);
    // One update per learned parameter, two moments each; running statistics stay as they were.
    size_t updates = 0, learned = 0, runningStats = 0;
    for (const auto& n : g.nodes()) updates += n->opName() == "adamw_step";
    for (const auto& p : g.params()) learned += ir::isLearned(*p);
    for (const auto& p : g.params()) runningStats += ir::getString(p->attrs(), "role").value_or("") == "running_stat";
    CHECK(updates == learned);
    CHECK(g.params().size() == 3 * learned + runningStats);
  }
}

TEST_CASE("optimizer errors: no gradients, a second run, bad options") {
  std::string forwardOnly = R"(graph g
  input %t : f32[4]
  param %w : f32[4]
  %0 = mse(%w, %t) : f32[] fwd  # loss
  output loss = %0
)";
  std::string message = optimizerError(forwardOnly);
  CHECK(contains(message, "parameter 'w' has no gradient output 'grad.w'"));
  CHECK(contains(message, "run autodiff before optimizer"));

  CHECK(contains(optimizerError("graph g\n  input %x : f32[]\n  output loss = %x\n"), "no parameters"));

  ir::Graph g = testing::parseOrFail(kDifferentiated);
  passes::OptimizerPass optimizer;
  REQUIRE(optimizer.run(g).ok());
  Expected<bool> again = optimizer.run(g);
  REQUIRE_FALSE(again.ok());
  CHECK(contains(again.error().message, "already has optimizer nodes"));

  OptimizerOptions o;
  o.totalSteps = 0;
  CHECK(contains(optimizerError(kDifferentiated, o), "total_steps >= 1"));
  o = {};
  o.warmupSteps = 5;
  CHECK(contains(optimizerError(kDifferentiated, o), "warmup_steps <= total_steps"));
  o = {};
  o.beta2 = 1.0;
  CHECK(contains(optimizerError(kDifferentiated, o), "beta1 and beta2 must be in [0, 1)"));
  o = {};
  o.minLr = 1.0;
  CHECK(contains(optimizerError(kDifferentiated, o), "min_lr must be in [0, lr"));
  o = {};
  o.clipNorm = -1.0;
  CHECK(contains(optimizerError(kDifferentiated, o), "clipping norm"));
}

TEST_CASE("optimizer defaults resolve as documented") {
  OptimizerOptions o;
  CHECK(o.kind == OptimizerOptions::Kind::AdamW);
  CHECK(o.resolvedMinLr() == doctest::Approx(1e-4));
  CHECK(o.resolvedWeightDecay() == 0.01);
  o.kind = OptimizerOptions::Kind::Sgd;
  CHECK(o.resolvedWeightDecay() == 0.0);
  o.weightDecay = 0.0;
  o.kind = OptimizerOptions::Kind::AdamW;
  CHECK(o.resolvedWeightDecay() == 0.0);
  o.minLr = 0.0;
  CHECK(o.resolvedMinLr() == 0.0);
}
