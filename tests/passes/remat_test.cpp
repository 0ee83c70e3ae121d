// The remat pass on every bundled model (reduced sizes), with every strategy:
//   - the rewritten graph verifies, its recompute nodes come after the forward and before
//     their first reader, clones keep their attributes (dropout's rng key);
//   - with a budget, the predicted peak (scheduled: passes::scheduledPeakBytes) is <= the budget;
//   - over a sweep of budgets the chosen peak is monotone (a smaller budget never gives a
//     larger peak), and a budget below the smallest feasible one is an Error that names it,
//     while that smallest feasible budget itself succeeds;
//   - the chain view of each model (stages per transformer block, per LSTM step);
//   - determinism and the strategy table.
// The numbers behind each model's table are printed (MESSAGE) for the docs.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tests/bundled_model.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/schedule.h"
#include "passes/autodiff.h"
#include "passes/budget.h"
#include "passes/dce.h"
#include "passes/memory/liveness.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
#include "passes/remat.h"

using namespace gradc;
using passes::RematStrategy;

namespace {

struct Model {
  std::string name;
  std::vector<std::pair<std::string, std::string>> sets;
};

// Small enough to plan in milliseconds, with activations (not parameters and optimizer state)
// dominating the peak, so that recompute matters.
std::vector<Model> models() {
  return {
      {"mlp", {{"batch", "64"}, {"features", "6"}, {"hidden", "24"}, {"outputs", "3"}, {"depth", "6"}}},
      {"gpt-mini", {{"batch", "4"}, {"seq", "32"}, {"vocab", "32"}, {"d_model", "16"}, {"heads", "2"}, {"layers", "3"}}},
      {"lstm-lm", {{"batch", "8"}, {"seq", "24"}, {"vocab", "16"}, {"embed", "8"}, {"hidden", "8"}}},
      {"lm-seed", {{"batch", "4"}, {"seq", "16"}, {"vocab", "24"}, {"d_model", "12"}, {"heads", "2"}, {"layers", "2"}}},
  };
}

ir::Graph forwardGraph(const Model& m) {
  return testing::compileBundledModel(m.name, m.sets);
}

// forward -> autodiff -> AdamW -> dce: what remat sees in the training pipeline.
ir::Graph jointGraph(const Model& m) {
  ir::Graph g = forwardGraph(m);
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>().add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(g);
  REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));
  return g;
}

std::int64_t peakOf(const ir::Graph& g) { return passes::scheduledPeakBytes(g); }

// Structural checks of a rewritten graph.
void checkRewritten(const ir::Graph& g) {
  Status v = ir::verify(g);
  REQUIRE_MESSAGE(v.ok(), v.message());
  bool backwardSeen = false;
  for (const auto& n : g.nodes()) {
    if (n->phase() == ir::Phase::bwd) backwardSeen = true;
    if (n->phase() != ir::Phase::recompute) continue;
    bool read = false, readInForward = false;
    for (size_t r = 0; r < n->numResults(); ++r) {
      read = read || n->result(r)->hasUses();
      for (const ir::Use& u : n->result(r)->uses())
        readInForward = readInForward || u.user->phase() == ir::Phase::fwd || u.user->phase() == ir::Phase::recompute;
    }
    // Before the backward only for a forward reader (the free-recompute path recomputes for the
    // forward's tail, passes/remat_free_path.h).
    CHECK_MESSAGE((backwardSeen || readInForward), "a recompute node was hoisted into the forward");
    CHECK_MESSAGE(read, "a recompute node nobody reads");
  }
}

struct Outcome {
  bool ok;
  std::int64_t peak = 0;
  std::string error;
  passes::TrainingPlanReport report;
  std::int64_t smallestFeasibleBytes = -1;  // of an infeasible budget (ErrorKind::InfeasibleBudget)
};

Outcome runRemat(const ir::Graph& joint, RematStrategy s, std::optional<std::int64_t> budget) {
  ir::Graph g = passes::remat::cloneGraph(joint);
  passes::RematPass pass(s, passes::PlanOptions{budget});
  Expected<bool> r = pass.run(g);
  if (!r) {
    const bool infeasible = r.error().kind == ErrorKind::InfeasibleBudget;
    return Outcome{false, 0, r.error().message, {}, infeasible ? r.error().smallestFeasibleBytes : -1};
  }
  checkRewritten(g);
  const std::int64_t peak = peakOf(g);
  CHECK(peak == pass.report().predictedPeakBytes);
  return Outcome{true, peak, {}, pass.report()};
}

// The smallest feasible budget a refusal carries, as a number (never read from its message).
std::int64_t smallestFeasible(const Outcome& refused) {
  REQUIRE_MESSAGE(refused.smallestFeasibleBytes > 0, refused.error);
  return refused.smallestFeasibleBytes;
}

}  // namespace

TEST_CASE("strategy names") {
  for (RematStrategy s : {RematStrategy::None, RematStrategy::Sqrt, RematStrategy::Chain, RematStrategy::MemoryPoor,
                          RematStrategy::Selective, RematStrategy::Auto}) {
    Expected<RematStrategy> parsed = passes::parseRematStrategy(passes::rematStrategyName(s));
    REQUIRE(parsed.ok());
    CHECK(*parsed == s);
  }
  CHECK(passes::parseRematStrategy("Memory-Poor").ok());
  Expected<RematStrategy> bad = passes::parseRematStrategy("revolve");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("none, sqrt, chain, memory-poor, selective, auto") != std::string::npos);
  CHECK(passes::createPass("remat") != nullptr);
}

TEST_CASE("graphs without a backward are left alone") {
  ir::Graph forward = forwardGraph(models()[1]);
  const std::string before = ir::printGraph(forward);
  for (RematStrategy s : {RematStrategy::Auto, RematStrategy::Chain, RematStrategy::MemoryPoor}) {
    passes::RematPass pass(s);
    Expected<bool> r = pass.run(forward);
    REQUIRE(r.ok());
    CHECK_FALSE(*r);
  }
  CHECK(ir::printGraph(forward) == before);
}

TEST_CASE("the chain view: stages per block, per time step, per layer") {
  auto stages = [](const Model& m) {
    ir::Graph g = jointGraph(m);
    Expected<passes::remat::Analysis> a = passes::remat::analyze(g);
    REQUIRE(a.ok());
    REQUIRE(a->episodes.size() == 1);
    return a->episodes[0];
  };
  // Pre-norm transformer: a cut after each residual add (two per block).
  passes::remat::Episode gpt = stages({"gpt-mini", {{"batch", "2"}, {"seq", "8"}, {"vocab", "16"}, {"d_model", "16"},
                                                   {"heads", "2"}, {"layers", "5"}}});
  MESSAGE("gpt-mini, 5 layers: " << gpt.rawStages << " stages, prefix " << gpt.prefixNodes << " nodes, tail "
                                 << gpt.tailNodes << " nodes");
  CHECK(gpt.rawStages >= 10);
  // LSTM: the input projection and its unbind are the prefix, the stack of h_t the tail, and
  // each time step at least one stage.
  passes::remat::Episode lstm = stages({"lstm-lm", {{"batch", "2"}, {"seq", "20"}, {"vocab", "16"}, {"embed", "4"}, {"hidden", "8"}}});
  MESSAGE("lstm-lm, 20 steps: " << lstm.rawStages << " stages, prefix " << lstm.prefixNodes << " nodes, tail "
                                << lstm.tailNodes << " nodes");
  CHECK(lstm.rawStages >= 20);
  CHECK(lstm.prefixNodes >= 2);
  CHECK(lstm.tailNodes >= 1);
  // MLP: every layer.
  passes::remat::Episode mlp = stages({"mlp", {{"batch", "4"}, {"depth", "7"}}});
  CHECK(mlp.rawStages >= 7);
  // Long chains are grouped for the solver.
  passes::remat::Episode deep = stages({"mlp", {{"batch", "4"}, {"hidden", "8"}, {"features", "4"}, {"depth", "200"}}});
  CHECK(deep.rawStages >= 200);
  CHECK(deep.stages.size() == static_cast<size_t>(passes::remat::kMaxSolverStages));
}

TEST_CASE("every strategy on every bundled model: valid graphs, the table") {
  for (const Model& m : models()) {
    CAPTURE(m.name);
    ir::Graph joint = jointGraph(m);
    const std::int64_t none = peakOf(joint);
    for (RematStrategy s : passes::concreteRematStrategies()) {
      CAPTURE(passes::rematStrategyName(s));
      Outcome o = runRemat(joint, s, std::nullopt);
      REQUIRE_MESSAGE(o.ok, o.error);
      if (s == RematStrategy::None) CHECK(o.peak == none);
      if (s == RematStrategy::Sqrt || s == RematStrategy::MemoryPoor) CHECK(o.report.recomputeFlops > 0);
      // chain without a budget: its smallest peak (no recompute when nothing saves memory).
      if (s == RematStrategy::Chain) CHECK((o.report.recomputeFlops > 0 || o.peak == none));
      if (s == RematStrategy::Chain) CHECK(o.peak <= none);
    }
    Expected<std::vector<passes::StrategySummary>> table = passes::summarizeStrategies(joint, std::nullopt);
    REQUIRE(table.ok());
    REQUIRE(table->size() == 6);
    CHECK(peakOf(joint) == none);  // the table leaves the graph alone
    MESSAGE(m.name << " (no budget):\n" << passes::formatStrategySummaries(*table));
  }
}

TEST_CASE("budget sweep: peak <= budget, monotone, and the smallest feasible budget is exact") {
  for (const Model& m : models()) {
    CAPTURE(m.name);
    ir::Graph joint = jointGraph(m);
    const std::int64_t none = peakOf(joint);
    const std::int64_t persistent = passes::analyzeLiveness(joint).persistentBytes;
    for (RematStrategy s : {RematStrategy::Auto, RematStrategy::None, RematStrategy::Sqrt, RematStrategy::Chain,
                            RematStrategy::MemoryPoor, RematStrategy::Selective}) {
      CAPTURE(passes::rematStrategyName(s));
      // From above the strategy's largest plan down to below the parameters and optimizer state.
      Outcome loose = runRemat(joint, s, std::nullopt);
      REQUIRE(loose.ok);
      const std::int64_t top = std::max(none, loose.peak) * 3 / 2;
      std::int64_t previous = top;
      std::int64_t minimum = -1;
      int fits = 0;
      const int steps = 16;
      for (int i = 0; i <= steps; ++i) {
        const std::int64_t budget = top - (top - persistent * 9 / 10) * i / steps;
        CAPTURE(budget);
        Outcome o = runRemat(joint, s, budget);
        if (o.ok) {
          ++fits;
          CHECK(o.peak <= budget);
          CHECK(o.peak <= previous);
          previous = o.peak;
        } else {
          CHECK(o.error.find("no plan fits") != std::string::npos);
          CHECK(o.error.find("dominated by") != std::string::npos);
          const std::int64_t smallest = smallestFeasible(o);
          CHECK(smallest > budget);
          if (minimum >= 0) CHECK(smallest == minimum);
          minimum = smallest;
        }
      }
      CHECK(fits >= 1);
      REQUIRE(minimum > 0);  // the sweep goes below every strategy's floor
      // The smallest feasible budget fits; one byte less does not.
      Outcome atMin = runRemat(joint, s, minimum);
      REQUIRE_MESSAGE(atMin.ok, atMin.error);
      CHECK(atMin.peak == minimum);
      CHECK_FALSE(runRemat(joint, s, minimum - 1).ok);
      MESSAGE(m.name << " " << passes::rematStrategyName(s) << ": fits " << fits << "/" << steps + 1
                     << " budgets, smallest feasible " << passes::formatBytesExact(minimum) << " (no remat "
                     << passes::formatBytesExact(none) << ")");
    }
  }
}

TEST_CASE("auto reaches at least as low as any single strategy, and fits with the least recompute") {
  for (const Model& m : models()) {
    CAPTURE(m.name);
    ir::Graph joint = jointGraph(m);
    Outcome poor = runRemat(joint, RematStrategy::MemoryPoor, std::nullopt);
    REQUIRE(poor.ok);
    // A budget every strategy of the family can meet at some cost: auto picks the cheapest.
    const std::int64_t none = peakOf(joint);
    const std::int64_t budget = (none + poor.peak) / 2;
    Outcome a = runRemat(joint, RematStrategy::Auto, budget);
    REQUIRE_MESSAGE(a.ok, a.error);
    for (RematStrategy s : passes::concreteRematStrategies()) {
      Outcome o = runRemat(joint, s, budget);
      if (o.ok) CHECK(a.report.recomputeFlops <= o.report.recomputeFlops);
    }
    MESSAGE(m.name << ": budget " << passes::formatBytes(budget) << " -> auto chose "
                   << passes::rematStrategyName(a.report.chosen) << ", peak " << passes::formatBytes(a.peak)
                   << ", recompute " << a.report.recomputePercent() << "% of a forward");
  }
}

TEST_CASE("recompute clones keep their attributes; the rewrite is deterministic") {
  Model m{"lm-seed", {{"batch", "2"}, {"seq", "6"}, {"vocab", "20"}, {"d_model", "12"}, {"heads", "2"}, {"layers", "2"}}};
  ir::Graph joint = jointGraph(m);
  std::string first;
  for (int round = 0; round < 2; ++round) {
    ir::Graph g = passes::remat::cloneGraph(joint);
    passes::RematPass pass(RematStrategy::MemoryPoor);
    REQUIRE(pass.run(g).ok());
    int dropouts = 0;
    std::map<std::int64_t, int> rngs;
    for (const auto& n : g.nodes())
      if (n->opName() == "dropout" && n->phase() != ir::Phase::bwd) rngs[*ir::getInt(n->attrs(), "rng")]++;
    for (const auto& n : g.nodes())
      if (n->phase() == ir::Phase::recompute && n->opName() == "dropout") {
        ++dropouts;
        // The same key as a forward dropout: the same mask.
        CHECK(rngs.count(*ir::getInt(n->attrs(), "rng")) == 1);
      }
    CHECK(dropouts > 0);
    std::string text = ir::printGraph(g);
    if (round == 0)
      first = text;
    else
      CHECK(text == first);
  }
}

TEST_CASE("infeasible budgets: the error names the smallest feasible budget and what dominates it") {
  Model m = models()[1];  // gpt-mini
  ir::Graph joint = jointGraph(m);
  Outcome tiny = runRemat(joint, RematStrategy::Auto, 1024);
  REQUIRE_FALSE(tiny.ok);
  MESSAGE(tiny.error);
  CHECK(tiny.error.find("no plan fits 1.0 KiB") != std::string::npos);
  CHECK(tiny.error.find("parameters + optimizer state") != std::string::npos);
  CHECK(tiny.error.find("the working set of op") != std::string::npos);

  // --remat none with a budget below its peak: the same kind of error, with a hint.
  const std::int64_t none = peakOf(joint);
  Outcome strict = runRemat(joint, RematStrategy::None, none - 1);
  REQUIRE_FALSE(strict.ok);
  MESSAGE(strict.error);
  CHECK(strict.error.find("with --remat none") != std::string::npos);
  CHECK(smallestFeasible(strict) == none);
  CHECK(strict.error.find("--remat auto fits") != std::string::npos);
  CHECK(runRemat(joint, RematStrategy::None, none).ok);

  // A graph remat already ran on is refused.
  ir::Graph twice = passes::remat::cloneGraph(joint);
  passes::RematPass first(RematStrategy::Sqrt);
  REQUIRE(first.run(twice).ok());
  passes::RematPass second(RematStrategy::Sqrt);
  Expected<bool> again = second.run(twice);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message.find("remat runs once") != std::string::npos);
}
