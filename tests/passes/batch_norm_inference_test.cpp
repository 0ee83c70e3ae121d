// The evaluation rewrite of batch normalisation (passes/batch_norm_inference.h): every batch_norm
// with running statistics reads them through batch_norm_inference, the updates are gone, and
// a batch_norm without running statistics (track_running_stats: false) keeps its batch
// statistics.
#include <doctest/doctest.h>

#include "ir/verifier.h"
#include "passes/batch_norm_inference.h"
#include "passes/dce.h"
#include "tests/bundled_model.h"

using namespace gradc;

namespace {

int count(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->opName() == op;
  return n;
}

}  // namespace

TEST_CASE("batch-norm-inference: resnet18-cifar normalises with its running statistics") {
  ir::Graph g = testing::compileBundledModel("resnet18-cifar", {{"batch", "2"}, {"image", "8"}, {"width", "4"}});
  const int norms = count(g, "batch_norm");
  REQUIRE(norms == 20);
  REQUIRE(count(g, "running_stats_update") == norms);
  passes::BatchNormInference pass;
  Expected<bool> changed = pass.run(g);
  REQUIRE_MESSAGE(changed.ok(), (changed.ok() ? "" : changed.error().message));
  CHECK(*changed);
  CHECK(count(g, "batch_norm") == 0);
  CHECK(count(g, "running_stats_update") == 0);
  CHECK(count(g, "batch_norm_inference") == norms);
  for (const auto& node : g.nodes())
    if (node->opName() == "batch_norm_inference") {
      CHECK(node->operand(3)->name().ends_with(".running_mean"));
      CHECK(node->operand(4)->name().ends_with(".running_var"));
    }
  CHECK(ir::verify(g).ok());
  CHECK_FALSE(*pass.run(g));  // nothing left to rewrite
}
