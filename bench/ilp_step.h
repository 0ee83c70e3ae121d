// The training step bench/remat_ilp.py writes Checkmate's MILP for (bench/remat_ilp_export),
// and the tests that check gradc against the MILP's optima plan: autodiff and dce over the
// forward, gradients as graph outputs (no optimizer, so both sides keep every gradient to the
// end), one micro-batch, the loss unfused.
#pragma once

#include <cstdint>
#include <optional>

#include "passes/plan/training_planner.h"

namespace gradc::bench {

inline passes::TrainingPlanOptions ilpStepOptions(passes::RematStrategy strategy, std::optional<std::int64_t> budget) {
  passes::TrainingPlanOptions o;
  o.optimizer = std::nullopt;
  o.microBatches = 1;
  o.lossChunks.mode = passes::LossChunking::Mode::Off;
  o.remat = strategy;
  o.plan.budgetBytes = budget;
  return o;
}

}  // namespace gradc::bench
