// The batch search (passes/plan/batch_search.h): on synthetic feasibility curves its answer is
// a scan's, with the next multiple refused and named with its smallest feasible budget; on
// bundled models the planner's smallest feasible budget does not fall as the batch grows (the
// property the search relies on), and the search over the real planner finds the scan's batch.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "passes/plan/batch_search.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

namespace gradc {
namespace {

using passes::BatchProbe;
using passes::BatchSearchOptions;
using passes::BatchSearchResult;

// An oracle over a smallest-feasible-budget curve S: a batch fits when S(b) <= budget, with a
// chosen plan peaking between S(b) and the budget (as the least-recompute plan does).
passes::BatchOracle curveOracle(std::function<std::int64_t(std::int64_t)> S, std::int64_t budget, int* calls) {
  return [S, budget, calls](std::int64_t b) -> Expected<BatchProbe> {
    ++*calls;
    BatchProbe p;
    const std::int64_t least = S(b);
    p.fits = least <= budget;
    if (p.fits) p.peakBytes = least + (budget - least) / 3;
    else p.smallestFeasibleBytes = least;
    return p;
  };
}

std::int64_t scanAnswer(const std::function<std::int64_t(std::int64_t)>& S, std::int64_t budget, std::int64_t m,
                        std::int64_t maxBatch) {
  std::int64_t best = 0;
  for (std::int64_t b = m; b <= maxBatch; b += m)
    if (S(b) <= budget) best = b;
    else break;
  return best;
}

TEST_CASE("batch search: the scan's answer on affine and stepped curves, with the next multiple refused") {
  struct Curve {
    const char* name;
    std::function<std::int64_t(std::int64_t)> S;
  };
  const std::vector<Curve> curves = {
      {"affine", [](std::int64_t b) { return 1'000'000 + 37'000 * b; }},
      {"steep constant", [](std::int64_t b) { return 900'000'000 + 5 * b; }},
      // recompute appears as plateaus: the least peak grows in steps, then linearly
      {"stepped", [](std::int64_t b) { return 2'000'000 + 50'000 * (b / 7) * 7 + 3'000 * b; }},
      {"convex", [](std::int64_t b) { return 500'000 + 20 * b * b; }},
  };
  for (const Curve& curve : curves)
    for (std::int64_t m : {1, 3, 8})
      for (std::int64_t start : {1, 7, 100, 5000})
        for (std::int64_t budget : {3'000'000LL, 40'000'000LL, 900'001'000LL, 2'000'000'000LL}) {
          const std::string name = curve.name;
          CAPTURE(name);
          CAPTURE(m);
          CAPTURE(start);
          CAPTURE(budget);
          const std::int64_t maxBatch = 1 << 20;
          int calls = 0;
          BatchSearchOptions o{budget, m, start, maxBatch};
          Expected<BatchSearchResult> r = passes::searchLargestBatch(curveOracle(curve.S, budget, &calls), o);
          REQUIRE(r.ok());
          const std::int64_t expected = scanAnswer(curve.S, budget, m, maxBatch);
          CHECK(r->batch == expected);
          CHECK(static_cast<int>(r->probes.size()) == calls);
          for (const BatchProbe& p : r->probes) CHECK(p.batch % m == 0);
          if (expected == maxBatch / m * m) {
            CHECK(r->reachedMax);
            continue;
          }
          REQUIRE(r->next.has_value());
          CHECK(r->next->batch == expected + m);
          CHECK_FALSE(r->next->fits);
          CHECK(r->next->smallestFeasibleBytes == curve.S(expected + m));
          if (expected > 0) {
            REQUIRE(r->chosen.has_value());
            CHECK(r->chosen->batch == expected);
            // Bracketing doubles, then secant steps with a bisection fallback: logarithmic.
            const double bound = 3 * std::log2(static_cast<double>(std::max(expected, start) / m) + 2) + 6;
            CHECK(static_cast<double>(calls) <= bound);
          }
        }
}

TEST_CASE("batch search: a probe's error ends the search; a fit at the cap is reported as the cap") {
  int calls = 0;
  auto failing = [&](std::int64_t b) -> Expected<BatchProbe> {
    ++calls;
    if (b > 16) return Error{"does not lower at " + std::to_string(b)};
    return BatchProbe{b, true, 100, 0, "", 0};
  };
  Expected<BatchSearchResult> r = passes::searchLargestBatch(failing, {1 << 30, 1, 4, 1 << 20});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.rfind("does not lower at ", 0) == 0);

  Expected<BatchSearchResult> capped =
      passes::searchLargestBatch(curveOracle([](std::int64_t) { return 10; }, 100, &calls), {100, 4, 1, 50});
  REQUIRE(capped.ok());
  CHECK(capped->batch == 48);
  CHECK(capped->reachedMax);
  CHECK_FALSE(capped->next.has_value());

  Expected<BatchSearchResult> none =
      passes::searchLargestBatch(curveOracle([](std::int64_t b) { return 1000 * b; }, 100, &calls), {100, 2, 64, 1 << 20});
  REQUIRE(none.ok());
  CHECK(none->batch == 0);
  REQUIRE(none->next.has_value());
  CHECK(none->next->batch == 2);
  CHECK(none->next->smallestFeasibleBytes == 2000);
}

// The planner at one batch: fits under `budget`, or its smallest feasible budget.
BatchProbe planAt(const std::string& model, const testing::DimOverrides& dims, const std::string& dim,
                  std::int64_t batch, std::int64_t budget) {
  testing::DimOverrides overrides = dims;
  overrides.emplace_back(dim, std::to_string(batch));
  const ir::Graph forward = testing::compileBundledModel(model, overrides);
  passes::TrainingPlanOptions options;
  options.plan.budgetBytes = budget;
  Expected<passes::TrainingPlan> plan = passes::chooseTrainingPlan(forward, options);
  BatchProbe p;
  p.batch = batch;
  p.fits = plan.ok();
  if (plan) {
    p.peakBytes = plan->report.predictedPeakBytes;
  } else {
    REQUIRE_MESSAGE(plan.error().kind == ErrorKind::InfeasibleBudget, plan.error().message);
    p.smallestFeasibleBytes = plan.error().smallestFeasibleBytes;
  }
  return p;
}

TEST_CASE("batch search: the planner's smallest feasible budget grows with the batch, and the search finds the scan's batch") {
  struct Case {
    std::string model;
    testing::DimOverrides dims;
  };
  const std::vector<Case> cases = {
      {"gpt-mini", {{"seq", "32"}, {"d_model", "64"}, {"heads", "2"}, {"layers", "3"}}},
      {"mlp", {}},
      {"resnet18-cifar", {{"image", "16"}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.model);
    std::vector<std::int64_t> least;  // S(1), S(2), ...
    for (std::int64_t b = 1; b <= 9; ++b) {
      const BatchProbe p = planAt(c.model, c.dims, "batch", b, 1);
      REQUIRE_FALSE(p.fits);
      if (!least.empty()) CHECK(p.smallestFeasibleBytes >= least.back());
      least.push_back(p.smallestFeasibleBytes);
    }
    REQUIRE(least.back() > least.front());
    // A budget between S(6) and S(7) when they differ: the answer is 6 (with S(7) the next's).
    std::int64_t k = 6;
    while (k < 9 && least[static_cast<size_t>(k)] == least[static_cast<size_t>(k - 1)]) ++k;
    REQUIRE(k < 9);
    const std::int64_t budget = (least[static_cast<size_t>(k - 1)] + least[static_cast<size_t>(k)]) / 2;
    Expected<BatchSearchResult> r = passes::searchLargestBatch(
        [&](std::int64_t b) -> Expected<BatchProbe> { return planAt(c.model, c.dims, "batch", b, budget); },
        {budget, 1, 2, 1 << 20});
    REQUIRE(r.ok());
    CHECK(r->batch == k);
    REQUIRE(r->next.has_value());
    CHECK(r->next->smallestFeasibleBytes == least[static_cast<size_t>(k)]);
    // The smallest feasible budget is accepted (the contract the answer rests on).
    CHECK(planAt(c.model, c.dims, "batch", k, least[static_cast<size_t>(k - 1)]).fits);
  }
}

}  // namespace
}  // namespace gradc
