// The evaluation step inside the training step's arena (passes/evaluation_plan.h,
// ExecutorOptions::arenaOf): it reads the parameters the training executor adopted, in place,
// computes the loss reference counting computes, bit for bit, and its measured peak is its
// plan's; an edited plan that would write a parameter, or that needs a larger arena, is refused.
#include <ATen/core/Tensor.h>

#include "passes/autodiff.h"
#include "passes/batch_norm_inference.h"
#include "passes/dce.h"
#include "passes/evaluation_plan.h"
#include "passes/memory/memory_plan.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "passes/strip_dropout.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"
#include "runtime/train/init.h"
#include "runtime/train/synthetic_inputs.h"
#include "tests/bundled_model.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

#include "runtime/exec/plan_json.h"

using namespace gradc;

namespace {

const testing::DimOverrides kDims{{"layers", "1"}, {"d_model", "64"}, {"heads", "2"}, {"seq", "32"}, {"batch", "4"}};

// The plan as the runtime reads it (through the plan codec), in an arena of `arenaBytes`.
ir::MemoryPlan arenaPlanOf(const passes::MemoryPlan& plan, std::int64_t arenaBytes) {
  Expected<ir::MemoryPlan> a = runtime::planFromJson(runtime::planToJson(plan));
  REQUIRE_MESSAGE(a.ok(), a.error().message);
  a->arenaBytes = arenaBytes;
  return std::move(*a);
}

struct Graphs {
  ir::Graph training{"t"}, evaluation{"e"};
  passes::MemoryPlan trainingPlan;
  passes::EvaluationPlan evaluationPlan;
};

Graphs build() {
  Graphs g;
  g.training = testing::compileBundledModel("gpt-mini", kDims);
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>().add<passes::DeadCodeElimination>().add<passes::Schedule>();
  REQUIRE(pm.run(g.training).ok());
  g.trainingPlan = passes::planMemory(g.training);
  g.evaluation = testing::compileBundledModel("gpt-mini", kDims);
  g.evaluation.removeOutputsIf([](const ir::GraphOutput& o) { return o.name != "loss"; });
  passes::PassManager inference;
  inference.add<passes::StripDropout>().add<passes::BatchNormInference>().add<passes::DeadCodeElimination>().add<passes::Schedule>();
  REQUIRE(inference.run(g.evaluation).ok());
  Expected<passes::EvaluationPlan> plan = passes::planEvaluationInside(g.evaluation, g.trainingPlan);
  REQUIRE_MESSAGE(plan, plan.error().message);
  g.evaluationPlan = std::move(*plan);
  return g;
}

runtime::TensorMap batch(const ir::Graph& g) {
  runtime::TensorMap inputs;
  for (const auto& in : g.inputs()) inputs.emplace(in->name(), runtime::syntheticInput(*in, 7, 1, 1, 0));
  return inputs;
}

}  // namespace

TEST_CASE("the evaluation step runs in the training arena: the parameters in place, the loss bit for bit, the peak planned") {
  runtime::MemoryTracker::install();
  Graphs g = build();
  const std::int64_t arena = g.evaluationPlan.arenaBytes;
  Expected<runtime::Executor> host = runtime::Executor::create(g.training, arenaPlanOf(g.trainingPlan, arena));
  REQUIRE_MESSAGE(host, host.error().message);
  Expected<runtime::TensorMap> init = runtime::initParameters(g.training, 3);
  REQUIRE(init);
  runtime::TensorMap state = std::move(*init);
  REQUIRE(host->adoptState(state).ok());
  // One training step first, so the arena's activation bytes hold something.
  REQUIRE(host->run(batch(g.training), state, runtime::RunContext{3, 1, nullptr}));

  // The reference: the same parameters, reference counted, no arena.
  runtime::TensorMap copies;
  for (const auto& [name, t] : state) copies.emplace(name, t.clone());
  Expected<runtime::Executor> reference = runtime::Executor::create(g.evaluation);
  REQUIRE(reference);
  runtime::TensorMap inputs = batch(g.evaluation);
  Expected<runtime::TensorMap> expected = reference->run(inputs, copies, runtime::RunContext{3, 1, nullptr});
  REQUIRE(expected);
  const double want = expected->at("loss").item<double>();
  expected->clear();
  copies.clear();

  runtime::ExecutorOptions shared;
  shared.arenaOf = &*host;
  shared.checkArena = true;
  Expected<runtime::Executor> eval =
      runtime::Executor::create(g.evaluation, arenaPlanOf(g.evaluationPlan.plan, g.evaluationPlan.plan.arenaBytes), shared);
  REQUIRE_MESSAGE(eval, eval.error().message);
  const void* weight = state.at("wte.weight").data_ptr();
  REQUIRE(eval->stageInputs(inputs).ok());
  inputs.clear();  // staged: nothing but the arena is held during the run
  runtime::MemoryTracker::resetPeak();
  Expected<runtime::TensorMap> out = eval->run(runtime::TensorMap{}, state, runtime::RunContext{3, 1, nullptr});
  REQUIRE_MESSAGE(out, out.error().message);
  CHECK(out->at("loss").item<double>() == want);
  CHECK(runtime::MemoryTracker::peakBytes() == g.evaluationPlan.plan.peakBytes);
  CHECK(state.at("wte.weight").data_ptr() == weight);  // read in place, never copied
  out->clear();
  // The training step runs on after it, unharmed (its arena check passes).
  REQUIRE(host->run(batch(g.training), state, runtime::RunContext{3, 2, nullptr}));
}

TEST_CASE("an evaluation plan over a parameter, or beyond the shared arena, is refused") {
  runtime::MemoryTracker::install();
  Graphs g = build();
  Expected<runtime::Executor> host =
      runtime::Executor::create(g.training, arenaPlanOf(g.trainingPlan, g.evaluationPlan.arenaBytes));
  REQUIRE(host);
  runtime::ExecutorOptions shared;
  shared.arenaOf = &*host;

  // An activation moved onto optimizer state, which the evaluation step does not read (so only
  // the check against the shared arena's persistent buffers can see it).
  ir::MemoryPlan over = arenaPlanOf(g.evaluationPlan.plan, g.evaluationPlan.plan.arenaBytes);
  std::int64_t stateOffset = -1;
  for (const auto& b : g.trainingPlan.buffers)
    if (b.kind == ir::BufferKind::OptState) stateOffset = b.offset;
  REQUIRE(stateOffset >= 0);
  for (auto& b : over.buffers)
    if (b.kind == ir::BufferKind::Activation) {
      b.offset = stateOffset;
      break;
    }
  Expected<runtime::Executor> bad = runtime::Executor::create(g.evaluation, over, shared);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("overlaps") != std::string::npos);

  ir::MemoryPlan larger = arenaPlanOf(g.evaluationPlan.plan, g.evaluationPlan.arenaBytes + 64);
  Expected<runtime::Executor> big = runtime::Executor::create(g.evaluation, larger, shared);
  REQUIRE_FALSE(big);
  CHECK(big.error().message.find("the arena it shares has") != std::string::npos);
}
