// The evaluation step's plan inside the training step's arena (passes/evaluation_plan.h): the
// parameters at the training plan's offsets, nothing else over a training persistent buffer,
// no overlap among the evaluation's own buffers, and the peak as the training state plus the
// evaluation's own bytes; a parameter the training step lacks is refused.
#include <doctest/doctest.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "passes/autodiff.h"
#include "passes/batch_norm_inference.h"
#include "passes/dce.h"
#include "passes/evaluation_plan.h"
#include "passes/memory/memory_plan.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "passes/strip_dropout.h"
#include "tests/bundled_model.h"

using namespace gradc;

namespace {

using Sets = std::vector<std::pair<std::string, std::string>>;

ir::Graph evaluationGraph(const std::string& model, const Sets& sets) {
  ir::Graph g = testing::compileBundledModel(model, sets);
  g.removeOutputsIf([](const ir::GraphOutput& o) { return o.name != "loss"; });
  passes::PassManager pm;
  pm.add<passes::StripDropout>().add<passes::BatchNormInference>().add<passes::DeadCodeElimination>().add<passes::Schedule>();
  REQUIRE(pm.run(g).ok());
  return g;
}

passes::MemoryPlan trainingPlan(const std::string& model, const Sets& sets) {
  ir::Graph g = testing::compileBundledModel(model, sets);
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>().add<passes::DeadCodeElimination>().add<passes::Schedule>();
  REQUIRE(pm.run(g).ok());
  return passes::planMemory(g);
}

bool persistent(const passes::PlannedBuffer& b) { return b.persistent(); }

}  // namespace

TEST_CASE("evaluation plans read the parameters in place and use only the training step's free bytes") {
  for (auto [model, sets] : {std::pair<std::string, Sets>{"gpt-mini", {{"layers", "2"}}},
                             {"lstm-lm", {{"seq", "64"}}},
                             {"resnet18-cifar", {{"batch", "4"}, {"image", "8"}, {"width", "8"}}}}) {
    CAPTURE(model);
    const passes::MemoryPlan host = trainingPlan(model, sets);
    const ir::Graph eval = evaluationGraph(model, sets);
    Expected<passes::EvaluationPlan> planned = passes::planEvaluationInside(eval, host);
    REQUIRE_MESSAGE(planned, planned.error().message);
    const passes::MemoryPlan& plan = planned->plan;
    std::unordered_map<std::string, const passes::PlannedBuffer*> hostPersistent;
    for (const auto& b : host.buffers)
      if (persistent(b)) hostPersistent.emplace(b.name, &b);

    std::int64_t shared = 0, parameters = 0;
    for (const auto& b : plan.buffers) {
      CAPTURE(b.name);
      auto it = hostPersistent.find(b.name);
      if (b.kind == ir::BufferKind::Param) {
        REQUIRE(it != hostPersistent.end());
        CHECK(b.offset == it->second->offset);
        parameters += b.size;
      }
      if (persistent(b) && it != hostPersistent.end() && it->second->offset == b.offset) {
        shared += b.size;
        continue;
      }
      for (const auto& [name, h] : hostPersistent)
        CHECK_MESSAGE(!(b.offset < h->offset + h->size && h->offset < b.offset + b.size), b.name << " overlaps " << name);
    }
    CHECK(parameters > 0);
    CHECK(shared == planned->sharedBytes);
    CHECK(passes::verifyNoOverlap(plan).ok());
    CHECK(planned->arenaBytes >= host.arenaBytes);
    // The peak: the training state, and what the evaluation holds beyond the shared buffers.
    const passes::MemoryPlan own = passes::planMemory(eval);
    CHECK(plan.peakBytes == host.persistentBytes + own.peakBytes - shared);
    CHECK(plan.peakBytes < host.peakBytes);  // a forward alone holds less than a training step
    MESSAGE(model << ": training peak " << host.peakBytes << ", evaluation peak " << plan.peakBytes << ", arena "
                  << host.arenaBytes << " -> " << planned->arenaBytes);
  }
}

TEST_CASE("an evaluation step that reads a parameter the training step lacks is refused") {
  const passes::MemoryPlan host = trainingPlan("mlp", {});
  const ir::Graph eval = evaluationGraph("mlp", {{"hidden", "128"}});  // other shapes, same names
  Expected<passes::EvaluationPlan> planned = passes::planEvaluationInside(eval, host);
  REQUIRE_FALSE(planned);
  CHECK(planned.error().message.find("which the training step does not hold") != std::string::npos);
}
