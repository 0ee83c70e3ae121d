// The free-recompute path (passes/remat_free_path.h): its proposals are nested and never raise
// the scheduled peak, and recompute for the tail's forward readers where that pays (what it
// does against the exact optimum: tests/passes/remat_optimum_test.cpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/ilp_step.h"
#include "passes/memory/liveness.h"
#include "passes/remat.h"
#include "passes/remat_free_path.h"
#include "passes/schedule.h"
#include "passes/memory/step_graph.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

using namespace gradc;
using passes::RematStrategy;

namespace {

struct Case {
  std::string model;
  testing::DimOverrides overrides;
};
// bench/remat_ilp.py's lstm8 and gpt2l.
const Case kLstm8{"lstm-lm", {{"seq", "8"}, {"batch", "32"}, {"embed", "8"}, {"hidden", "16"}, {"vocab", "8"}}};
const Case kGpt2l{"gpt-mini", {{"layers", "2"}, {"batch", "2"}, {"seq", "16"}, {"d_model", "32"}, {"heads", "2"}}};

struct Step {
  ir::Graph forward;
  std::optional<passes::TrainingPlan> base;
  std::optional<passes::remat::Analysis> analysis;
  std::optional<passes::StepFacts> facts;

  explicit Step(const Case& c) : forward(testing::compileBundledModel(c.model, c.overrides)) {
    Expected<passes::TrainingPlan> b = passes::chooseTrainingPlan(forward, bench::ilpStepOptions(RematStrategy::None, std::nullopt));
    REQUIRE(b);
    base = std::move(*b);
    Expected<passes::remat::Analysis> a = passes::remat::analyze(base->graph);
    REQUIRE(a);
    analysis = std::move(*a);
    facts.emplace(base->graph, passes::analyzeStorage(base->graph));
  }
  std::int64_t peak(const passes::remat::Candidate& c) const {
    const passes::RewritePlan plan = passes::remat::planRewrite(*analysis, c);
    return passes::scheduledPeak(passes::buildStepGraph(*facts, &plan)).bytes;
  }
};

}  // namespace

TEST_CASE("free-recompute path: nested sets, a peak that never rises, distinct proposals") {
  for (const Case& c : {kLstm8, kGpt2l, Case{"gpt-mini", {}}}) {
    CAPTURE(c.model);
    const Step step(c);
    const std::vector<passes::remat::Candidate> path = passes::remat::freePathCandidates(*step.analysis, *step.facts);
    REQUIRE(path.size() >= 3);
    const std::int64_t none = passes::scheduledPeak(passes::buildStepGraph(*step.facts)).bytes;
    std::int64_t before = none;
    std::vector<std::string> seen;
    for (size_t i = 0; i < path.size(); ++i) {
      CAPTURE(path[i].description);
      const bool pruned = path[i].description.find("does without") != std::string::npos;
      CHECK((!pruned || i + 1 == path.size()));  // only the path's end is pruned
      const std::int64_t peak = step.peak(path[i]);
      CHECK(peak <= before);
      before = peak;
      for (const std::string& d : seen) CHECK(d != path[i].description);
      seen.push_back(path[i].description);
      if (i + 1 == path.size()) CHECK(peak < none);
      if (i == 0 || pruned) continue;
      // Each step adds one value to the set before it.
      size_t added = 0;
      for (size_t e = 0; e < path[i].episodes.size(); ++e) {
        const std::vector<char>& now = *path[i].episodes[e].freeChosen;
        const std::vector<char>& was = *path[i - 1].episodes[e].freeChosen;
        for (size_t k = 0; k < now.size(); ++k) {
          CHECK((!was[k] || now[k]));
          added += now[k] && !was[k] ? 1 : 0;
        }
      }
      CHECK(added == 1);
    }
  }
}

// The LSTM's stack of every h_t reads each one at the end of the forward, so dropping h_t
// saves nothing unless the stack reads a recomputed copy: the path recomputes for it, and
// reaches a peak no tier of free values reaches.
TEST_CASE("free-recompute path: recomputes for the tail's forward readers, below every other proposal") {
  const Step step(kLstm8);
  const std::vector<passes::remat::Candidate> path = passes::remat::freePathCandidates(*step.analysis, *step.facts);
  REQUIRE_FALSE(path.empty());
  std::int64_t others = -1;
  for (const passes::remat::Candidate& c : passes::remat::candidates(*step.analysis, RematStrategy::Auto)) {
    const std::int64_t p = step.peak(c);
    others = others < 0 ? p : std::min(others, p);
  }
  std::int64_t least = others;
  for (const passes::remat::Candidate& c : path) least = std::min(least, step.peak(c));
  CHECK(least < others);
  // Some clone of the path's last proposal runs before the backward: for the stack.
  const passes::RewritePlan last = passes::remat::planRewrite(*step.analysis, path.back());
  bool inForward = false;
  for (const passes::CloneOp& clone : last.clones)
    inForward = inForward || clone.before < step.analysis->episodes[0].forwardEnd;
  CHECK(inForward);
  MESSAGE("lstm8: the path reaches " << least << " bytes, the other proposals " << others);
}
