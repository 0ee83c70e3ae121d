// plan_bench: how long remat planning takes on long chains (a benchmark, not a test).
//
// For each scenario it compiles a bundled model, builds the training step (autodiff, AdamW,
// dce), then times RematPass (analysis, chain solver, proposals, measuring their scheduled
// peaks, applying the choice) under a byte budget, per strategy. It prints the graph size,
// the budget, the chosen plan, its predicted peak and recompute, the proposals measured and
// scheduled, and the wall time.
//
//   plan_bench                       the default scenarios: mlp depth=1000 batch=1024 (budget
//                                    fraction 0.3) and lstm-lm seq=1000 (fraction 0.9),
//                                    strategies chain and auto; both at fraction 0 (nothing
//                                    fits: the smallest feasible budget is searched); a
//                                    sweep of 30 budgets on gpt-mini
//   plan_bench MODEL.yaml [--set name=value]... [--strategy S]... [--budget B | --fraction F]
//              [--repeat N] [--table] [--micro-batches K|auto] [--sweep N] [--no-optimizer]
//   --sweep N runs passes::chooseTrainingPlan (auto) at N budgets spread evenly from the
//   persistent bytes to the step without recompute, and times the whole sweep.
//   --no-optimizer plans the step without AdamW (gradients as outputs), as bench/remat_ilp.py.
//   --table prints every strategy's predicted peak and recompute (what `gradc compile --emit
//   summary` shows): without --budget, each strategy's plan without a budget.
//   --micro-batches times passes::chooseTrainingPlan (micro-batching, AdamW, dce, remat) for
//   that count, or every divisor of the batch with `auto`.
//
// The default budget is the parameters, optimizer state and inputs plus a fraction F (0.3) of
// what the step needs beyond them without remat: a budget that forces recomputation.
// GRADC_SOURCE_DIR in the environment overrides where the bundled models are found.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_spec.h"
#include "frontend/spec.h"
#include "passes/autodiff.h"
#include "passes/budget.h"
#include "passes/dce.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "runtime/backends/kernel_targets.h"

using namespace gradc;
using Clock = std::chrono::steady_clock;

namespace {

struct Scenario {
  std::string spec;
  std::vector<std::pair<std::string, std::string>> sets;
  std::vector<passes::RematStrategy> strategies;
  std::optional<std::int64_t> budget;
  double fraction = 0.3;
  int repeat = 3;
  bool table = false;  // print every strategy's row (passes::summarizeStrategies) instead
  int microBatches = 1;  // != 1: time passes::chooseTrainingPlan instead (0: auto)
  int sweep = 0;  // > 0: that many budgets from the persistent bytes to the full step, one run each
  bool optimizer = true;  // false: gradients as outputs (the step bench/remat_ilp.py models)
};

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int run(const Scenario& s) {
  std::string label = s.spec;
  for (const auto& [k, v] : s.sets) label += " " + k + "=" + v;
  frontend::SpecOptions options;
  options.overrides = s.sets;
  const auto t0 = Clock::now();
  std::optional<frontend::SpecResult> spec = bench::compileBenchSpec("plan_bench", s.spec, options, true);
  if (!spec) return 1;
  ir::Graph joint = passes::remat::cloneGraph(*spec->graph);
  passes::PassManager pm(passes::PassManagerOptions{.verifyAfterChange = false});
  pm.add<passes::Autodiff>();
  if (s.optimizer) pm.add<passes::OptimizerPass>();
  pm.add<passes::DeadCodeElimination>();
  if (Expected<bool> r = pm.run(joint); !r) {
    std::fprintf(stderr, "plan_bench: %s\n", r.error().message.c_str());
    return 1;
  }
  const auto t1 = Clock::now();
  const passes::Liveness none = passes::scheduleAndAnalyze(joint).liveness;
  const std::int64_t budget =
      s.budget.value_or(none.persistentBytes +
                        static_cast<std::int64_t>(s.fraction * static_cast<double>(none.peakBytes - none.persistentBytes)));
  std::printf("%s\n  joint graph: %zu nodes (built in %.2f s); peak without remat %s; persistent %s; budget %s\n",
              label.c_str(), joint.numNodes(), seconds(t0, t1), passes::formatBytes(none.peakBytes).c_str(),
              passes::formatBytes(none.persistentBytes).c_str(),
              s.table && !s.budget ? "none" : passes::formatBytesExact(budget).c_str());
  if (s.sweep > 0) {
    // The whole planner (auto) at budgets spread evenly above the persistent bytes up to the
    // step without recompute: the time of the whole sweep, and how many budgets fit.
    int fits = 0;
    std::int64_t previousRecompute = -1;
    bool monotone = true;
    const auto a = Clock::now();
    for (int i = 1; i <= s.sweep; ++i) {
      passes::TrainingPlanOptions options;
      if (!s.optimizer) options.optimizer = std::nullopt;
      options.microBatches = s.microBatches;
      options.remat = passes::RematStrategy::Auto;
      options.plan.budgetBytes = none.persistentBytes + (none.peakBytes - none.persistentBytes) * i / s.sweep;
      Expected<passes::TrainingPlan> c = passes::chooseTrainingPlan(*spec->graph, options);
      if (!c) continue;
      ++fits;
      if (previousRecompute >= 0 && c->report.recomputeFlops > previousRecompute) monotone = false;
      previousRecompute = c->report.recomputeFlops;
    }
    const auto b = Clock::now();
    std::printf("  sweep of %d budgets (auto, micro-batches %s): %.3f s, %d fit, recompute %s as the budget grows\n",
                s.sweep, s.microBatches == 0 ? "auto" : std::to_string(s.microBatches).c_str(), seconds(a, b), fits,
                monotone ? "never grows" : "GROWS");
    return 0;
  }
  if (s.microBatches != 1) {
    // The whole planner: micro-batched gradients, AdamW and dce for each count, then remat.
    for (passes::RematStrategy strategy : s.strategies) {
      passes::TrainingPlanOptions options;
      if (!s.optimizer) options.optimizer = std::nullopt;
      options.microBatches = s.microBatches;
      options.remat = strategy;
      options.plan.budgetBytes = budget;
      const auto a = Clock::now();
      Expected<passes::TrainingPlan> c = passes::chooseTrainingPlan(*spec->graph, options);
      const auto b = Clock::now();
      if (!c) {
        std::printf("  %-12s %.3f s  no plan: %s\n", std::string(passes::rematStrategyName(strategy)).c_str(),
                    seconds(a, b), c.error().message.c_str());
        continue;
      }
      std::printf("  %-12s %.3f s  micro-batches %d, %s: peak %s, recompute %.1f%% of a forward\n",
                  std::string(passes::rematStrategyName(strategy)).c_str(), seconds(a, b), c->report.config.microBatches,
                  c->report.plan.c_str(), passes::formatBytes(c->report.predictedPeakBytes).c_str(),
                  c->report.recomputePercent());
    }
    return 0;
  }
  if (s.table) {
    const auto a = Clock::now();
    Expected<std::vector<passes::StrategySummary>> rows =
        passes::summarizeStrategies(joint, s.budget ? std::optional<std::int64_t>(budget) : std::nullopt);
    const auto b = Clock::now();
    if (!rows) {
      std::fprintf(stderr, "plan_bench: %s\n", rows.error().message.c_str());
      return 1;
    }
    std::printf("%s  (table computed in %.3f s)\n", passes::formatStrategySummaries(*rows).c_str(), seconds(a, b));
    return 0;
  }
  for (passes::RematStrategy strategy : s.strategies) {
    std::vector<double> times;
    passes::TrainingPlanReport report;
    std::string error;
    size_t nodes = 0;
    for (int i = 0; i < s.repeat; ++i) {
      ir::Graph g = passes::remat::cloneGraph(joint);
      passes::RematPass pass(strategy, passes::PlanOptions{budget});
      const auto a = Clock::now();
      Expected<bool> r = pass.run(g);
      const auto b = Clock::now();
      times.push_back(seconds(a, b));
      if (!r) {
        error = r.error().message;
        break;
      }
      report = pass.report();
      nodes = g.numNodes();
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    if (!error.empty()) {
      std::printf("  %-12s %.3f s  no plan: %s\n", std::string(passes::rematStrategyName(strategy)).c_str(), median,
                  error.c_str());
      continue;
    }
    std::printf("  %-12s %.3f s (median of %zu)  chose %s: peak %s, recompute %.1f%% of a forward, "
                "%d recompute nodes (%zu total), %d chain stages, %d/%d proposals measured, %d scheduled\n",
                std::string(passes::rematStrategyName(strategy)).c_str(), median, times.size(),
                std::string(passes::rematStrategyName(report.chosen)).c_str(),
                passes::formatBytes(report.predictedPeakBytes).c_str(), report.recomputePercent(), report.recomputeNodes,
                nodes, report.chainStages, report.evaluated, report.candidates, report.scheduled);
  }
  return 0;
}

std::string modelPath(const std::string& name) {
  if (const char* root = std::getenv("GRADC_SOURCE_DIR")) return std::string(root) + "/models/" + name + ".yaml";
  return std::string(GRADC_SOURCE_DIR) + "/models/" + name + ".yaml";
}

}  // namespace

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  using passes::RematStrategy;
  std::vector<Scenario> scenarios;
  if (argc <= 1) {
    const std::vector<RematStrategy> both = {RematStrategy::Chain, RematStrategy::Auto};
    // A 1,000-layer MLP with a batch large enough for activations to dominate (at the default
    // batch of 64 the gradients of its 66 M parameters do, which no recompute changes).
    scenarios.push_back({modelPath("mlp"), {{"depth", "1000"}, {"batch", "1024"}}, both, std::nullopt, 0.3, 3});
    // A 1,000-step LSTM: its floor is high (the input projection and the per-step input
    // gradients stay alive whatever is recomputed), so the budget sits near the top.
    scenarios.push_back({modelPath("lstm-lm"), {{"seq", "1000"}}, both, std::nullopt, 0.9, 3});
    // Infeasible: a budget of the persistent bytes alone, so every proposal is refused and the
    // smallest feasible budget is searched.
    scenarios.push_back({modelPath("mlp"), {{"depth", "1000"}, {"batch", "1024"}}, {RematStrategy::Auto}, std::nullopt,
                         0.0, 1});
    scenarios.push_back({modelPath("lstm-lm"), {{"seq", "1000"}}, {RematStrategy::Auto}, std::nullopt, 0.0, 1});
    // Thirty budgets on gpt-mini, each through the whole planner.
    Scenario sweep{modelPath("gpt-mini"), {}, {RematStrategy::Auto}, std::nullopt, 0.3, 1};
    sweep.sweep = 30;
    scenarios.push_back(sweep);
  } else {
    Scenario s;
    s.spec = argv[1];
    for (int i = 2; i < argc; ++i) {
      std::string arg = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "plan_bench: %s needs a value\n", arg.c_str());
          std::exit(2);
        }
        return argv[++i];
      };
      if (arg == "--set") {
        std::optional<std::pair<std::string, std::string>> set = bench::splitOverride(next());
        if (!set) {
          std::fprintf(stderr, "plan_bench: --set takes name=value\n");
          return 2;
        }
        s.sets.push_back(std::move(*set));
      } else if (arg == "--strategy") {
        Expected<RematStrategy> st = passes::parseRematStrategy(next());
        if (!st) {
          std::fprintf(stderr, "plan_bench: %s\n", st.error().message.c_str());
          return 2;
        }
        s.strategies.push_back(*st);
      } else if (arg == "--budget") {
        Expected<std::int64_t> b = passes::parseBytes(next());
        if (!b) {
          std::fprintf(stderr, "plan_bench: %s\n", b.error().message.c_str());
          return 2;
        }
        s.budget = *b;
      } else if (arg == "--fraction") {
        s.fraction = std::atof(next().c_str());
      } else if (arg == "--micro-batches") {
        std::string k = next();
        s.microBatches = k == "auto" ? 0 : std::max(1, std::atoi(k.c_str()));
      } else if (arg == "--no-optimizer") {
        s.optimizer = false;
      } else if (arg == "--sweep") {
        s.sweep = std::max(1, std::atoi(next().c_str()));
      } else if (arg == "--table") {
        s.table = true;
      } else if (arg == "--repeat") {
        s.repeat = std::max(1, std::atoi(next().c_str()));
      } else {
        std::fprintf(stderr, "plan_bench: unknown argument '%s'\n", arg.c_str());
        return 2;
      }
    }
    if (s.strategies.empty()) s.strategies = {RematStrategy::Chain, RematStrategy::Auto};
    scenarios.push_back(std::move(s));
  }
  for (const Scenario& s : scenarios)
    if (int rc = run(s); rc != 0) return rc;
  return 0;
}
