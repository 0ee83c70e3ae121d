// gradc against the exact optimum: at the budgets of bench/remat_ilp.py's table where the MILP
// (Checkmate's, forward recompute only, stages in gradc's order) is solved to proven optimality,
// `--remat auto` on the same step needs at most 5% more recompute FLOPs than the optimum, and on
// the chains (the MLPs) exactly as much. The optima are the MILP's figures
// (bench/results/remat_ilp_forward_only.json, HiGHS), recorded here: this is the regression
// test of the comparison, which takes half an hour to rerun.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "bench/ilp_step.h"
#include "passes/remat.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

using namespace gradc;

namespace {

struct Case {
  std::string name;
  std::string model;
  testing::DimOverrides overrides;
  bool chain;  // equal to the optimum, not only within 5%
};
// bench/remat_ilp.py's CASES.
const Case kMlp4{"mlp4", "mlp", {{"depth", "4"}, {"batch", "256"}, {"hidden", "64"}}, true};
const Case kMlp8{"mlp8", "mlp", {{"depth", "8"}, {"batch", "256"}, {"hidden", "64"}}, true};
const Case kGpt2l{"gpt2l", "gpt-mini", {{"layers", "2"}, {"batch", "2"}, {"seq", "16"}, {"d_model", "32"}, {"heads", "2"}}, false};
const Case kLstm8{"lstm8", "lstm-lm", {{"seq", "8"}, {"batch", "32"}, {"embed", "8"}, {"hidden", "16"}, {"vocab", "8"}}, false};

struct Optimum {
  const Case* c;
  std::int64_t budget;
  std::int64_t flops;  // the MILP's optimal recompute
};

}  // namespace

TEST_CASE("remat against the exact optimum: within 5% at every proven budget, equal on chains") {
  // The LSTM at 167,200-191,898 bytes: the table's budgets before its smallest feasible step
  // fell to 165,152 (the optima stay optima for those budgets).
  const Optimum optima[] = {
      {&kMlp4, 350020, 9633792},   {&kMlp4, 398427, 3211264},   {&kMlp4, 448300, 1081344},
      {&kMlp8, 483140, 21364736},  {&kMlp8, 596089, 7471104},   {&kMlp8, 712462, 3211264},
      {&kGpt2l, 343556, 84992},    {&kGpt2l, 358340, 60416},    {&kGpt2l, 373572, 27648},
      {&kLstm8, 165152, 7168},     {&kLstm8, 167200, 6656},
      {&kLstm8, 177992, 4096},     {&kLstm8, 179365, 4096},     {&kLstm8, 191223, 1024},
      {&kLstm8, 191898, 512},
  };
  for (const Optimum& o : optima) {
    CAPTURE(o.c->name);
    CAPTURE(o.budget);
    const ir::Graph forward = testing::compileBundledModel(o.c->model, o.c->overrides);
    Expected<passes::TrainingPlan> at =
        passes::chooseTrainingPlan(forward, bench::ilpStepOptions(passes::RematStrategy::Auto, o.budget));
    REQUIRE_MESSAGE(at, at.error().message);
    CAPTURE(at->report.plan);
    CHECK(at->report.predictedPeakBytes <= o.budget);
    CHECK(20 * at->report.recomputeFlops <= 21 * o.flops);
    if (o.c->chain) CHECK(at->report.recomputeFlops <= o.flops);
    MESSAGE(o.c->name << " at " << o.budget << " bytes: " << at->report.recomputeFlops << " recompute FLOPs ("
                      << at->report.recomputePercent() << "% of a forward), the optimum " << o.flops);
  }
}
