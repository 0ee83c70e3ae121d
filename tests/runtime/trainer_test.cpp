// The training loop end to end: loss goes down, an interrupted and resumed run repeats the
// uninterrupted run bit for bit, the metrics carry the measured peak, and bad data or a
// mismatched checkpoint are clear errors.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontend/spec.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "runtime/train/trainer.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc;

namespace {

std::filesystem::path tempDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / ("gradc-trainer-test-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A small gpt-mini with dropout on, trained with AdamW.
ir::Graph trainingGraph(std::int64_t seq = 16) {
  frontend::SpecOptions options;
  options.overrides = {{"batch", "4"}, {"seq", std::to_string(seq)}, {"d_model", "32"}, {"heads", "2"}, {"layers", "2"}};
  frontend::SpecResult r = frontend::compileSpecFile(std::string(GRADC_SOURCE_DIR) + "/models/gpt-mini.yaml", options);
  REQUIRE(r.ok());
  ir::Graph g = std::move(*r.graph);
  passes::OptimizerOptions opt;
  opt.lr = 3e-3;
  opt.warmupSteps = 3;
  opt.totalSteps = 40;
  opt.clipNorm = 1.0;
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>(opt).add<passes::DeadCodeElimination>();
  REQUIRE(pm.run(g).ok());
  return g;
}

std::filesystem::path writeText(const std::filesystem::path& dir, const std::string& text) {
  std::filesystem::path file = dir / "data.txt";
  std::ofstream(file) << text;
  return file;
}

std::string corpus() {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 7) + ". ";
  return text;
}

}  // namespace

TEST_CASE("training lowers the loss and reports the measured peak") {
  std::filesystem::path dir = tempDir("loss");
  ir::Graph g = trainingGraph();
  runtime::TrainerOptions o;
  o.model = "gpt-mini";
  o.steps = 40;
  o.data = writeText(dir, corpus());
  o.progress = false;
  Expected<runtime::TrainResult> r = runtime::train(g, o);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  const auto& steps = r->metrics.steps;
  REQUIRE(steps.size() == 40);
  MESSAGE("loss " << steps.front().loss << " -> " << steps.back().loss);
  CHECK(steps.back().loss < 0.6 * steps.front().loss);
  REQUIRE(r->metrics.ranks.size() == 1);
  std::int64_t paramBytes = 0;
  for (const auto& [name, t] : r->state) paramBytes += t.numel() * static_cast<std::int64_t>(t.element_size());
  // Parameters and AdamW state are live throughout, so the peak is at least their size.
  CHECK(r->metrics.ranks[0].peakBytesMeasured > paramBytes);
  CHECK(steps[0].lr == doctest::Approx(1e-3));  // warmup: 3e-3 * 1/3
  std::string json = runtime::metricsToJson(r->metrics);
  CHECK(json.find("\"peak_bytes_planned\": null") != std::string::npos);
  CHECK(json.find("\"tokens_per_s\"") != std::string::npos);
  CHECK(json.find("beyond_plan") == std::string::npos);  // written only when a step went beyond
  CHECK(json.find("peak_step") == std::string::npos);    // a device's only: the host measures no step
  runtime::RunMetrics beyond = r->metrics;
  beyond.ranks[0].beyondPlan.push_back({121, "sum_to", "blocks.3.fc1", 16777728, 512});
  const nlohmann::json parsed = nlohmann::json::parse(runtime::metricsToJson(beyond));
  const nlohmann::json& entry = parsed["ranks"][0]["beyond_plan"][0];
  CHECK(entry["step"] == 121);
  CHECK(entry["op"] == "sum_to");
  CHECK(entry["name"] == "blocks.3.fc1");
  CHECK(entry["bytes"] == 16777728);
  CHECK(entry["workspace"] == 512);
  beyond.ranks[0].peakStep = runtime::BeyondPlan{5424, "softmax_backward", "blocks.1.attn", 11324620800, 0};
  const nlohmann::json withPeak = nlohmann::json::parse(runtime::metricsToJson(beyond));
  CHECK(withPeak["ranks"][0]["peak_step"]["step"] == 5424);
  CHECK(withPeak["ranks"][0]["peak_step"]["bytes"] == 11324620800);
}

TEST_CASE("an interrupted run resumed from its checkpoint repeats the straight run bit for bit") {
  std::filesystem::path dir = tempDir("resume");
  ir::Graph g = trainingGraph();
  runtime::TrainerOptions o;
  o.model = "gpt-mini";
  o.steps = 20;
  o.seed = 11;
  o.data = writeText(dir, corpus());
  o.progress = false;

  Expected<runtime::TrainResult> straight = runtime::train(g, o);
  REQUIRE(straight.ok());

  runtime::TrainerOptions first = o;
  first.saveDir = dir / "ck";
  first.onStep = [](const runtime::StepMetrics& m) { return m.step < 10; };  // interrupted after step 10
  Expected<runtime::TrainResult> part1 = runtime::train(g, first);
  REQUIRE(part1.ok());
  REQUIRE(part1->metrics.steps.size() == 10);

  runtime::TrainerOptions second = o;
  second.seed = 999;  // ignored: the checkpoint's seed wins
  second.resumeDir = dir / "ck";
  Expected<runtime::TrainResult> part2 = runtime::train(g, second);
  REQUIRE_MESSAGE(part2.ok(), (part2.ok() ? "" : part2.error().message));
  REQUIRE(part2->metrics.steps.size() == 10);
  CHECK(part2->metrics.steps.front().step == 11);

  for (int i = 0; i < 20; ++i) {
    double resumed = i < 10 ? part1->metrics.steps[i].loss : part2->metrics.steps[i - 10].loss;
    CAPTURE(i);
    CHECK(resumed == straight->metrics.steps[i].loss);  // exact, not approximate
  }
  REQUIRE(part2->state.size() == straight->state.size());
  for (const auto& [name, t] : straight->state) {
    CAPTURE(name);
    CHECK(at::equal(t, part2->state.at(name)));
  }
}

TEST_CASE("bad data and mismatched checkpoints are clear errors") {
  std::filesystem::path dir = tempDir("errors");
  ir::Graph g = trainingGraph();
  runtime::TrainerOptions o;
  o.steps = 2;
  o.progress = false;
  o.data = writeText(dir, "too short");
  Expected<runtime::TrainResult> r = runtime::train(g, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("needs") != std::string::npos);

  // A checkpoint of a model with another sequence length does not fit this one.
  o.data = writeText(dir, corpus());
  o.saveDir = dir / "ck";
  REQUIRE(runtime::train(g, o).ok());
  ir::Graph other = trainingGraph(8);
  runtime::TrainerOptions resume = o;
  resume.saveDir.reset();
  resume.resumeDir = dir / "ck";
  resume.steps = 4;
  Expected<runtime::TrainResult> mismatch = runtime::train(other, resume);
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.error().message.find("wpe.weight") != std::string::npos);
  CHECK(mismatch.error().message.find("f32[16, 32]") != std::string::npos);

  resume.steps = 2;  // nothing left to do
  Expected<runtime::TrainResult> done = runtime::train(g, resume);
  REQUIRE_FALSE(done.ok());
  CHECK(done.error().message.find("leaves nothing to do") != std::string::npos);
}
