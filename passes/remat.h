// Rematerialisation: the remat pass, which plans one joint graph under a byte budget (the
// training pipeline plans several candidate graphs at once, passes/plan/), and the per-strategy
// summary of `gradc compile --emit summary`. The proposals are remat_strategies.h's; how one is
// chosen, the budget contract and its guarantees are passes/plan/plan_selection.h's.
//
// Pipeline position: after autodiff (or micro-batching), optimizer and dce, before schedule
// and the memory plan.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "passes/pass.h"
#include "passes/plan/plan_selection.h"
#include "passes/remat_strategies.h"

namespace gradc::passes {

class RematPass final : public Pass {
 public:
  explicit RematPass(RematStrategy strategy = RematStrategy::Auto, PlanOptions options = {})
      : strategy_(strategy), options_(std::move(options)) {}
  std::string_view name() const override { return "remat"; }
  Expected<bool> run(ir::Graph& graph) override;
  const TrainingPlanReport& report() const { return report_; }

 private:
  RematStrategy strategy_;
  PlanOptions options_;
  TrainingPlanReport report_;
};

// One row of `gradc compile --emit summary`: what a strategy does to this step.
struct StrategySummary {
  RematStrategy strategy = RematStrategy::None;
  bool fits = true;  // false: no plan of this strategy fits the budget
  // The chosen plan's peak; when nothing fits, the smallest peak the strategy reaches.
  std::int64_t predictedPeakBytes = 0;
  std::int64_t recomputeFlops = 0;
  double recomputePercent = 0;  // of one forward
  std::int64_t savedBytes = 0;  // against none
  std::string plan;
};
// Every strategy (none, sqrt, chain, memory-poor, selective, auto) on a joint graph, which is
// left as it was (proposals are measured without rewriting it). With a budget each row is the plan the strategy would choose under it; without
// one, the plan it applies without a budget (see above). The graph is only read (a fused
// loss is measured at its own chunk count), so other threads may read it meanwhile; the rows
// are measured on two threads.
Expected<std::vector<StrategySummary>> summarizeStrategies(ir::Graph& joint, std::optional<std::int64_t> budget);
// A fixed-width text table of the rows.
std::string formatStrategySummaries(std::span<const StrategySummary> rows);

}  // namespace gradc::passes
