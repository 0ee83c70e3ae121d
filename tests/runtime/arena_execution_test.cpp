// Arena execution against reference counting, on every bundled model (at test sizes), with and
// without a budget (recompute), with micro-batches, SGD and AdamW:
//  - losses and final parameters and optimizer state are bit-identical to GRADC_NO_ARENA's path;
//  - the measured peak (arena bytes in use + bytes allocated outside the arena) equals the
//    plan's peak to the byte;
//  - no buffer is written outside its planned interval (the executor's arena check: free
//    ranges poisoned and checked);
//  - no op allocates more than its declared workspace beyond its results, and that workspace is
//    served from the step's planned range of the arena.
//  - and every op allocates exactly its declared workspace, no less (a plan must not hold bytes
//    its kernels never use, or measured != planned wherever that step is the peak).
// bf16 steps (gpt-mini, llama, the fused loss) are held to the same on both routes of their
// matrix products: widened to f32 and oneDNN's, each with the temporaries the plan declares
// (docs/memory.md, "bf16").
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "ir/op_table.h"
#include "ir/printer.h"
#include "onednn/gemm.h"
#include "passes/budget.h"
#include "passes/memory/memory_plan.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/schedule.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"
#include "runtime/train/init.h"
#include "runtime/train/trainer.h"
#include "tests/bundled_model.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

#include "runtime/exec/plan_json.h"

using namespace gradc;

namespace {

struct Case {
  std::string model;
  testing::DimOverrides dims;
  std::string budget;  // "" = none
  std::string remat = "none";
  int microBatches = 1;
  passes::OptimizerOptions::Kind optimizer = passes::OptimizerOptions::Kind::AdamW;
  double clipNorm = 0;
  std::string lossChunks = "off";  // --loss-chunks
  std::string dtype = "f32";       // the spec's element type
};

std::string nameOf(const Case& c) {
  std::string s = c.model;
  for (const auto& [k, v] : c.dims) s += " " + k + "=" + v;
  if (!c.budget.empty()) s += " budget " + c.budget;
  s += " remat " + c.remat + " micro " + std::to_string(c.microBatches);
  s += c.optimizer == passes::OptimizerOptions::Kind::Sgd ? " sgd" : " adamw";
  if (c.clipNorm > 0) s += " clip";
  if (c.lossChunks != "off") s += " loss-chunks " + c.lossChunks;
  if (c.dtype != "f32") s += " " + c.dtype;
  return s;
}

struct Step {
  ir::Graph graph;
  passes::MemoryPlan plan;
};

// The options `gradc train` plans the case's step with (tools/training_step.cpp).
passes::TrainingPlanOptions planOptions(const Case& c) {
  passes::TrainingPlanOptions o;
  o.optimizer = passes::OptimizerOptions{};
  o.optimizer->kind = c.optimizer;
  o.optimizer->clipNorm = c.clipNorm;
  if (c.optimizer == passes::OptimizerOptions::Kind::Sgd) o.optimizer->momentum = 0.9;
  if (!c.budget.empty()) o.plan.budgetBytes = *passes::parseBytes(c.budget);
  o.remat = *passes::parseRematStrategy(c.remat);
  o.microBatches = c.microBatches;
  o.lossChunks = *passes::parseLossChunks(c.lossChunks);
  return o;
}

// The case's forward graph, planned for the runtime's threads (per-thread workspace is sized
// for them), as `gradc train` plans it.
ir::Graph forwardOf(const Case& c) {
  ir::Graph forward = c.dtype == "f32" ? testing::compileBundledModel(c.model, c.dims)
                                       : testing::compileBundledModelAs(c.model, c.dtype, c.dims);
  forward.setKernelThreads(at::get_num_threads());
  return forward;
}

// The training step as `gradc train` builds it (tools/training_step.cpp).
Step buildStep(const Case& c) {
  const ir::Graph forward = forwardOf(c);
  Expected<passes::TrainingPlan> choice = passes::chooseTrainingPlan(forward, planOptions(c));
  REQUIRE_MESSAGE(choice.ok(), choice.error().message);
  Step step{std::move(choice->graph), {}};
  passes::PassManager pm;
  pm.add<passes::Schedule>();
  REQUIRE(pm.run(step.graph).ok());
  step.plan = passes::planMemory(step.graph);
  return step;
}

// The plan as the runtime reads it from an artifact: through the plan codec.
ir::MemoryPlan arenaPlanOf(const passes::MemoryPlan& plan) {
  Expected<ir::MemoryPlan> a = runtime::planFromJson(runtime::planToJson(plan));
  REQUIRE_MESSAGE(a.ok(), a.error().message);
  return std::move(*a);
}

runtime::TrainResult train(const Step& step, bool arena, std::int64_t steps = 3) {
  runtime::TrainerOptions t;
  t.model = "test";
  t.steps = steps;
  t.progress = false;
  t.plannedPeakBytes = step.plan.peakBytes;
  if (arena) {
    t.arenaPlan = arenaPlanOf(step.plan);
    t.checkArena = true;
  }
  Expected<runtime::TrainResult> r = runtime::train(step.graph, t);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  CHECK(r->arena == arena);
  return std::move(*r);
}

bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

void checkCase(const Case& c) {
  INFO(nameOf(c));
  Step step = buildStep(c);
  // The arena run first: the tracker's peak is absolute, and the reference run's results would
  // still be alive during it.
  const std::int64_t servedBefore = runtime::MemoryTracker::regionBytesServed();
  runtime::TrainResult arena = train(step, /*arena=*/true);
  // Kernel temporaries were carved from their steps' planned workspace in the arena.
  CHECK(runtime::MemoryTracker::regionBytesServed() > servedBefore);
  runtime::TrainResult reference = train(step, /*arena=*/false);

  REQUIRE(reference.metrics.steps.size() == arena.metrics.steps.size());
  for (size_t i = 0; i < arena.metrics.steps.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(arena.metrics.steps[i].loss == reference.metrics.steps[i].loss);  // bit for bit
  }
  REQUIRE(arena.state.size() == reference.state.size());
  for (const auto& [name, t] : reference.state) {
    INFO(name);
    CHECK(sameBits(arena.state.at(name), t));
  }
  // Outside-arena bytes of every step within its planned workspace.
  std::vector<std::int64_t> workspace(step.plan.steps.size(), 0);
  for (const passes::PlannedBuffer& b : step.plan.buffers)
    if (b.workspace()) workspace[static_cast<size_t>(b.firstStep)] += b.size;
  REQUIRE(arena.outsideArenaBytes.size() == workspace.size());
  // And exactly that workspace: a declaration above what the kernel allocates is a plan that
  // holds bytes nothing uses, and wherever that step is the peak, measured != planned.
  std::ostringstream over, under;
  for (size_t i = 0; i < workspace.size(); ++i) {
    if (arena.outsideArenaBytes[i] == workspace[i]) continue;
    (arena.outsideArenaBytes[i] > workspace[i] ? over : under)
        << " step " << i << " (" << step.plan.steps[i].op << "): " << arena.outsideArenaBytes[i] << " vs "
        << workspace[i] << ";";
  }
  CHECK_MESSAGE(over.str().empty(), "ops allocating beyond their declared workspace:" << over.str());
  CHECK_MESSAGE(under.str().empty(), "ops allocating less than their declared workspace:" << under.str());

  // The measured peak is the plan's, to the byte, in every dtype (bf16 products included: their
  // oneDNN scratchpad is declared workspace, runtime/host/host_workspace_products.cpp).
  std::vector<std::int64_t> live(workspace.size(), 0);
  for (const passes::PlannedBuffer& b : step.plan.buffers)
    for (int i = std::max(b.firstStep, 0); i <= b.lastStep && i < static_cast<int>(live.size()); ++i)
      live[static_cast<size_t>(i)] += b.size;
  CHECK(*std::max_element(live.begin(), live.end()) == step.plan.peakBytes);
  CHECK(arena.metrics.ranks.at(0).peakBytesMeasured == step.plan.peakBytes);

  // What escaped the arena to the heap, by op (reported; bounded by the workspace above).
  std::map<std::string, std::int64_t> escaped;
  for (size_t i = 0; i < arena.heapBytes.size(); ++i)
    if (arena.heapBytes[i] > 0)
      escaped[step.plan.steps[i].op] = std::max(escaped[step.plan.steps[i].op], arena.heapBytes[i]);
  std::ostringstream heap;
  for (const auto& [op, bytes] : escaped) heap << " " << op << " " << bytes << " B;";
  if (!escaped.empty()) MESSAGE(nameOf(c) << ": temporaries on the heap, largest per op:" << heap.str());
}

}  // namespace

TEST_CASE("arena execution: mlp, bit-identical to reference counting, measured peak == planned") {
  runtime::MemoryTracker::install();
  checkCase({"mlp", {{"batch", "16"}, {"hidden", "64"}}});
  checkCase({"mlp", {{"batch", "16"}, {"hidden", "64"}}, "", "none", 1, passes::OptimizerOptions::Kind::Sgd, 1.0});
  checkCase({"mlp", {{"batch", "16"}, {"hidden", "64"}}, "", "none", 4});
}

TEST_CASE("arena execution: gpt-mini with and without a budget") {
  runtime::MemoryTracker::install();
  const testing::DimOverrides dims{{"batch", "2"}, {"seq", "16"}, {"d_model", "32"}, {"layers", "2"}};
  checkCase({"gpt-mini", dims});
  checkCase({"gpt-mini", dims, "", "sqrt"});
  checkCase({"gpt-mini", dims, "", "selective", 1, passes::OptimizerOptions::Kind::Sgd, 0.5});
  checkCase({"gpt-mini", dims, "", "memory-poor", 2});
  // A budget 3% under the unconstrained peak: auto picks recompute (and micro-batches) to fit.
  const std::int64_t peak = buildStep({"gpt-mini", dims}).plan.peakBytes;
  checkCase({"gpt-mini", dims, std::to_string(peak * 97 / 100), "auto", 0});
}

TEST_CASE("arena execution: lstm-lm and lm-seed") {
  runtime::MemoryTracker::install();
  checkCase({"lstm-lm", {{"batch", "2"}, {"seq", "12"}, {"embed", "16"}, {"hidden", "24"}}});
  checkCase({"lstm-lm", {{"batch", "2"}, {"seq", "12"}, {"embed", "16"}, {"hidden", "24"}}, "", "chain"});
  checkCase({"lm-seed",
             {{"batch", "2"}, {"seq", "8"}, {"vocab", "50"}, {"d_model", "32"}, {"heads", "2"}, {"layers", "2"}}});
  // At its smallest feasible budget this LSTM runs a plan of the free-recompute path
  // (passes/remat_free_path.h), whose recomputed h_t also feed the forward's stack: recompute
  // nodes before the backward.
  Case path{"lstm-lm", {{"seq", "8"}, {"batch", "32"}, {"embed", "8"}, {"hidden", "16"}, {"vocab", "8"}}, "1", "auto"};
  const Expected<passes::TrainingPlan> refused =
      passes::chooseTrainingPlan(forwardOf(path), planOptions(path));
  REQUIRE_FALSE(refused.ok());
  REQUIRE(refused.error().kind == ErrorKind::InfeasibleBudget);
  path.budget = std::to_string(refused.error().smallestFeasibleBytes);
  const Step step = buildStep(path);
  bool recomputedInForward = false;
  for (const auto& n : step.graph.nodes()) {
    if (n->phase() == ir::Phase::bwd) break;
    recomputedInForward = recomputedInForward || n->phase() == ir::Phase::recompute;
  }
  CHECK(recomputedInForward);
  checkCase(path);
}

TEST_CASE("arena execution: gpt2 (tied), llama (rope, GQA, RMSNorm, SwiGLU), bert-mlm") {
  runtime::MemoryTracker::install();
  using Kind = passes::OptimizerOptions::Kind;
  const testing::DimOverrides gpt2{{"batch", "2"}, {"context", "24"}, {"seq", "16"}, {"vocab", "64"},
                                   {"d_model", "32"}, {"heads", "4"}, {"layers", "2"}};
  checkCase({"gpt2", gpt2});
  checkCase({"gpt2", gpt2, "", "sqrt", 2});
  checkCase({"gpt2", gpt2, "", "none", 1, Kind::AdamW, 0, "3"});  // the fused loss reads the tied weight
  const testing::DimOverrides llama{{"batch", "2"}, {"seq", "16"}, {"vocab", "64"}, {"d_model", "32"}, {"heads", "4"},
                                    {"kv_heads", "2"}, {"layers", "2"}, {"d_ff", "48"}};
  checkCase({"llama", llama});
  checkCase({"llama", llama, "", "selective", 2, Kind::Sgd, 0.5});
  checkCase({"llama", llama, "", "memory-poor"});
  const testing::DimOverrides bert{{"batch", "2"}, {"seq", "16"}, {"vocab", "64"}, {"d_model", "32"}, {"heads", "2"},
                                   {"layers", "2"}};
  checkCase({"bert-mlm", bert});
  checkCase({"bert-mlm", bert, "", "chain", 2});
}

TEST_CASE("arena execution: bf16 gpt-mini and llama: measured peak == planned on every product route") {
  runtime::MemoryTracker::install();
  using Kind = passes::OptimizerOptions::Kind;
  const testing::DimOverrides gpt{{"batch", "2"}, {"seq", "32"}, {"d_model", "64"}, {"layers", "2"}};
  const testing::DimOverrides llama{{"batch", "2"}, {"seq", "32"}, {"vocab", "64"}, {"d_model", "64"}, {"heads", "4"},
                                    {"kv_heads", "2"}, {"layers", "2"}, {"d_ff", "96"}};
  // The products widened to f32 (any CPU), and on oneDNN (where it has a bf16 kernel).
  std::vector<onednn::Bf16Route> routes{onednn::Bf16Route::kWidened};
  if (onednn::available()) routes.push_back(onednn::Bf16Route::kOneDnn);
  for (onednn::Bf16Route route : routes) {
    REQUIRE(onednn::imposeBf16Route(route));
    INFO("bf16 products " << std::string(onednn::nameOf(route)));
    checkCase({"gpt-mini", gpt, "", "none", 1, Kind::AdamW, 0, "off", "bf16"});
    checkCase({"gpt-mini", gpt, "", "selective", 1, Kind::Sgd, 0.5, "off", "bf16"});
    checkCase({"gpt-mini", gpt, "", "none", 1, Kind::AdamW, 0, "3", "bf16"});  // the fused loss, 3 chunks
    checkCase({"llama", llama, "", "none", 1, Kind::AdamW, 0, "off", "bf16"});
    checkCase({"llama", llama, "", "memory-poor", 1, Kind::AdamW, 0, "off", "bf16"});
  }
  onednn::imposeBf16Route(std::nullopt);
}

TEST_CASE("arena execution: resnets (conv2d, batch norm with running statistics, pooling)") {
  runtime::MemoryTracker::install();
  using Kind = passes::OptimizerOptions::Kind;
  const testing::DimOverrides r18{{"batch", "4"}, {"image", "8"}, {"width", "4"}};
  checkCase({"resnet18-cifar", r18});
  checkCase({"resnet18-cifar", r18, "", "sqrt", 1, Kind::Sgd, 0.5});
  checkCase({"resnet18-cifar", r18, "", "none", 2});  // micro-batches: per-micro-batch statistics
  const testing::DimOverrides deep{{"batch", "2"}, {"image", "8"}, {"depth", "29"}, {"width", "2"}};
  checkCase({"resnet-deep", deep, "", "chain"});
  checkCase({"resnet-deep", deep, "", "memory-poor"});
}

TEST_CASE("arena execution: the fused LM-head loss, alone, with micro-batches, remat and a budget") {
  runtime::MemoryTracker::install();
  using Kind = passes::OptimizerOptions::Kind;
  const testing::DimOverrides gpt{{"batch", "2"}, {"seq", "16"}, {"vocab", "300"}, {"d_model", "32"}, {"layers", "2"}};
  checkCase({"gpt-mini", gpt, "", "none", 1, Kind::AdamW, 0, "1"});
  checkCase({"gpt-mini", gpt, "", "none", 1, Kind::AdamW, 0, "5"});  // 32 rows: chunks of 7, the last of 4
  checkCase({"gpt-mini", gpt, "", "sqrt", 2, Kind::Sgd, 0.5, "3"});
  // Logits dominate (128 rows x 4096 classes): unfused the step needs 6.2 MB, and no remat
  // plan goes below 5.9 MB; fused it needs 4.4 MB in 1 chunk, 3.3 MB in 2, 2.8 MB in 4. Under
  // 3 MiB auto picks the fused loss in 4 chunks.
  const testing::DimOverrides wide{{"batch", "4"},   {"seq", "32"},   {"vocab", "4096"},
                                   {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}};
  checkCase({"gpt-mini", wide, "3MiB", "auto", 1, Kind::AdamW, 0, "auto"});
  CHECK(passes::lossChunksOf(buildStep({"gpt-mini", wide, "3MiB", "auto", 1, Kind::AdamW, 0, "auto"}).graph) == 4);
  checkCase({"lm-seed", {{"batch", "2"}, {"seq", "8"}, {"vocab", "200"}, {"d_model", "24"}, {"heads", "2"}, {"layers", "2"}},
             "", "memory-poor", 1, Kind::AdamW, 0, "4"});
}

TEST_CASE("arena execution: the trained state leaves the arena without a copy and outlives the executor") {
  runtime::MemoryTracker::install();
  const Step step = buildStep({"gpt-mini", {{"batch", "2"}, {"seq", "16"}, {"d_model", "32"}, {"layers", "2"}}});
  Expected<runtime::TensorMap> init = runtime::initParameters(step.graph, 7);
  REQUIRE(init.ok());
  runtime::TensorMap expected;
  for (const auto& [name, t] : *init) expected.emplace(name, t.clone());
  runtime::TensorMap state = std::move(*init);
  std::map<std::string, const void*> where;
  {
    Expected<runtime::Executor> exec = runtime::Executor::create(step.graph, arenaPlanOf(step.plan));
    REQUIRE_MESSAGE(exec.ok(), exec.error().message);
    REQUIRE(exec->adoptState(state).ok());
    for (const auto& [name, t] : state) where.emplace(name, t.data_ptr());
    const std::int64_t allocationsBefore = runtime::MemoryTracker::allocationCount();
    const std::int64_t bytesBefore = runtime::MemoryTracker::currentBytes();
    exec->releaseState(state);
    // Nothing copied: no allocation, the same bytes.
    CHECK(runtime::MemoryTracker::allocationCount() == allocationsBefore);
    CHECK(runtime::MemoryTracker::currentBytes() == bytesBefore);
    for (const auto& [name, t] : state) CHECK(t.data_ptr() == where.at(name));
  }  // the executor is gone; the state holds the arena
  REQUIRE(state.size() == expected.size());
  for (const auto& [name, t] : expected) {
    INFO(name);
    CHECK(sameBits(state.at(name), t));
  }
}
