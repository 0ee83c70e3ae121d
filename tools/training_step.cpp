#include "tools/training_step.h"

#include <fmt/format.h>

#include <iostream>

#include "passes/budget.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "tools/commands.h"

namespace gradc::tools {

void MemoryFlags::addTo(CLI::App& cmd) {
  cmd.add_option("--budget", budget,
                 "Memory per device for the whole training step: 512MiB, 2GB, 1.5GiB or bytes. Recompute and "
                 "micro-batching are chosen to fit it, or the smallest feasible budget is reported");
  cmd.add_option("--remat", remat,
                 "Recompute strategy: none, sqrt, chain, memory-poor, selective or auto (default: auto with "
                 "--budget, none without)")
      ->check(CLI::IsMember({"none", "sqrt", "chain", "memory-poor", "selective", "auto"}));
  cmd.add_option("--micro-batches", microBatches,
                 "Split each batch into K micro-batches with gradient accumulation, or auto (with --budget)")
      ->capture_default_str();
}

std::optional<TrainingStep> buildTrainingStep(const ir::Graph& forward, const passes::OptimizerOptions& optimizer,
                                              const MemoryFlags& flags, int& exitCode) {
  exitCode = kExitUserError;
  passes::TrainingPlanOptions options;
  options.optimizer = optimizer;
  if (!flags.budget.empty()) {
    Expected<std::int64_t> bytes = passes::parseBytes(flags.budget);
    if (!bytes) {
      std::cerr << "gradc: error: --budget: " << bytes.error().message << "\n";
      return std::nullopt;
    }
    options.remat.budgetBytes = *bytes;
  }
  std::string strategy = !flags.remat.empty() ? flags.remat : options.remat.budgetBytes ? "auto" : "none";
  Expected<passes::RematStrategy> parsed = passes::parseRematStrategy(strategy);
  if (!parsed) {
    std::cerr << "gradc: error: --remat: " << parsed.error().message << "\n";
    return std::nullopt;
  }
  options.remat.strategy = *parsed;
  if (flags.microBatches == "auto") {
    if (!options.remat.budgetBytes) {
      std::cerr << "gradc: error: --micro-batches auto needs --budget (it picks the count that fits)\n";
      return std::nullopt;
    }
    options.microBatches = 0;
  } else {
    try {
      size_t used = 0;
      int k = std::stoi(flags.microBatches, &used);
      if (used != flags.microBatches.size() || k < 1) throw std::invalid_argument("k");
      options.microBatches = k;
    } catch (const std::exception&) {
      std::cerr << "gradc: error: --micro-batches expects a positive count or auto, got '" << flags.microBatches
                << "'\n";
      return std::nullopt;
    }
  }

  Expected<passes::RematChoice> choice = passes::chooseTrainingPlan(forward, options);
  if (!choice) {
    std::cerr << "gradc: error: " << choice.error().message << "\n";
    return std::nullopt;
  }
  TrainingStep step{std::move(choice->graph), choice->report, {}, choice->microBatches};
  passes::PassManager pm;
  pm.add<passes::Schedule>();
  if (Expected<bool> ran = pm.run(step.graph); !ran) {
    std::cerr << "gradc: error: " << ran.error().message << "\n";
    exitCode = kExitInternal;
    return std::nullopt;
  }
  step.plan = passes::planMemory(step.graph);
  step.plan.strategy = std::string(passes::rematStrategyName(step.remat.chosen));
  step.plan.budgetBytes = options.remat.budgetBytes;
  if (options.remat.budgetBytes && step.plan.peakBytes > *options.remat.budgetBytes) {
    // Remat checks its own prediction; the schedule never raises the peak. A failure here is a bug.
    std::cerr << "gradc: error: internal: the scheduled step needs " << step.plan.peakBytes
              << " bytes, over the budget of " << *options.remat.budgetBytes << "\n";
    exitCode = kExitInternal;
    return std::nullopt;
  }
  exitCode = kExitOk;
  return step;
}

std::string describeStep(const TrainingStep& step) {
  std::string line = fmt::format("memory plan: remat {}, {} micro-batch{}, predicted peak {}",
                                 passes::rematStrategyName(step.remat.chosen), step.microBatches,
                                 step.microBatches == 1 ? "" : "es", passes::formatBytes(step.plan.peakBytes));
  if (step.plan.budgetBytes) line += fmt::format(" of {} budget", passes::formatBytes(*step.plan.budgetBytes));
  if (step.remat.recomputeFlops > 0)
    line += fmt::format(", recompute {:.1f}% of a forward", step.remat.recomputePercent());
  return line;
}

}  // namespace gradc::tools
