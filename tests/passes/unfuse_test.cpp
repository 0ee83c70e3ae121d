// The reference step (passes/unfuse.h): fused regions back to their ops, one-pass updates back
// to ATen's, in the fused node's place; the reference step of a compiled training step plans
// without overlaps, keeps the persistent buffers and holds no generated-kernel node.
#include <doctest/doctest.h>

#include "../ir/test_util.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/fuse.h"
#include "passes/plan/training_planner.h"
#include "passes/unfuse.h"
#include "tests/bundled_model.h"

using namespace gradc;
using gradc::testing::parseOrFail;

namespace {

int countOp(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->opName() == op;
  return n;
}

int onePassUpdates(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes()) n += ir::getBool(node->attrs(), "fused").value_or(false);
  return n;
}

}  // namespace

TEST_CASE("a fused chain unfuses to the graph it came from, spec layers and attributes included") {
  const std::string original = R"(graph t
  input %x : f32[4, 8]
  param %b : f32[8]
  param %w : f32[8, 8]
  %0 = add(%x, %b) : f32[4, 8] fwd  # fc
  %1 = relu(%0) : f32[4, 8] fwd  # act
  %2 = scale(%1) {factor = 0.5} : f32[4, 8] fwd  # half
  %3 = matmul(%2, %w) : f32[4, 8] fwd  # proj
  %4 = tanh(%3) : f32[4, 8] fwd  # out
  %5 = mul(%4, %1) : f32[4, 8] fwd  # gate
  output y = %5
  output a = %1
)";
  ir::Graph g = parseOrFail(original);
  Expected<passes::FuseStats> fused = passes::fuseElementwise(g);
  REQUIRE(fused);
  REQUIRE(fused->regions == 2);
  REQUIRE(countOp(g, "fused") == 2);
  Expected<passes::UnfuseStats> stats = passes::unfuseElementwise(g);
  REQUIRE(stats);
  CHECK(stats->regions == 2);
  CHECK(stats->nodes == 5);
  REQUIRE(ir::verify(g));
  CHECK(countOp(g, "fused") == 0);
  CHECK(ir::printGraph(g) == ir::printGraph(parseOrFail(original)));
}

TEST_CASE("the reference step of bundled training steps: no generated kernels, the same persistent buffers, "
          "a plan without overlaps") {
  const std::vector<std::pair<std::string, gradc::testing::DimOverrides>> models = {
      {"mlp", {}},
      {"gpt-mini", {{"batch", "2"}, {"seq", "32"}, {"layers", "2"}}},
      {"lstm-lm", {{"batch", "2"}, {"seq", "16"}}},
      {"llama", {{"batch", "2"}, {"seq", "32"}, {"layers", "2"}}},
  };
  for (const auto& [model, dims] : models) {
    ir::Graph forward = gradc::testing::compileBundledModel(model, dims);
    for (passes::RematStrategy strategy : {passes::RematStrategy::None, passes::RematStrategy::Sqrt}) {
      CAPTURE(model);
      CAPTURE(passes::rematStrategyName(strategy));
      passes::TrainingPlanOptions options;
      options.remat = strategy;
      options.fuseElementwise = true;
      Expected<passes::TrainingStepResult> step = passes::buildTrainingStepPipeline(forward, options, {});
      REQUIRE(step);
      const int regions = countOp(step->graph, "fused");
      REQUIRE(regions + onePassUpdates(step->graph) > 0);
      Expected<passes::ReferenceStep> reference = passes::referenceStep(step->graph, step->plan);
      REQUIRE(reference);
      REQUIRE(ir::verify(reference->graph));
      CHECK(countOp(reference->graph, "fused") == 0);
      CHECK(onePassUpdates(reference->graph) == 0);
      CHECK(reference->stats.regions == regions);
      CHECK(reference->stats.onePassUpdates == onePassUpdates(step->graph));
      CHECK(reference->graph.numNodes() ==
            step->graph.numNodes() - static_cast<size_t>(regions) + static_cast<size_t>(reference->stats.nodes));
      // The compiled step is untouched.
      CHECK(countOp(step->graph, "fused") == regions);
      CHECK(passes::verifyNoOverlap(reference->plan));
      CHECK(reference->plan.persistentBytes == step->plan.persistentBytes);
      CHECK(reference->plan.strategy == step->plan.strategy);
      // Persistent buffers keep their offsets, so the evaluation step's shared buffers still match.
      for (size_t i = 0; i < step->plan.buffers.size(); ++i) {
        const passes::PlannedBuffer& b = step->plan.buffers[i];
        if (!b.persistent()) break;
        REQUIRE(i < reference->plan.buffers.size());
        CHECK(reference->plan.buffers[i].name == b.name);
        CHECK(reference->plan.buffers[i].offset == b.offset);
      }
      MESSAGE(model << " " << passes::rematStrategyName(strategy) << ": " << regions << " regions as "
                    << reference->stats.nodes << " nodes; peak " << step->plan.peakBytes << " B compiled, "
                    << reference->plan.peakBytes << " B reference");
    }
  }
}
