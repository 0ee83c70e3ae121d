// The metrics JSON written by `gradc train --metrics-out FILE.json`. A contract that scripts
// rely on and later features extend (never rename a field; add new ones):
//
//   {"model": "gpt-mini",
//    "steps": [{"step": 1, "loss": 5.61, "step_time_s": 0.41, "tokens_per_s": 4987.1, "lr": 0.001}, ...],
//    "ranks": [{"rank": 0, "peak_bytes_measured": 123456789, "peak_bytes_planned": 123456789,
//               "comm_wait_s": 0.8}]}            (comm_wait_s: data-parallel runs only)
//   With --val-data, the steps evaluated also have "val_loss", and every rank
//   "eval_peak_bytes_measured" / "eval_peak_bytes_planned" (the evaluation step's peak over the run).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/status.h"
#include "runtime/exec/beyond_plan.h"
#include "runtime/kernels/blas_kernels.h"

namespace gradc::runtime {

struct StepMetrics {
  std::int64_t step = 0;
  double loss = 0;
  double stepTimeS = 0;
  double tokensPerS = 0;
  std::int64_t minorFaults = 0;  // minor page faults of the process during the step
  double lr = 0;
  std::optional<double> gradNorm;  // when gradient clipping is on
  std::optional<double> valLoss;   // the validation loss after this step, when evaluated
};

struct RankMetrics {
  int rank = 0;
  std::int64_t peakBytesMeasured = 0;
  std::optional<std::int64_t> peakBytesPlanned;  // the memory plan's prediction; null when not planned
  std::optional<double> commWaitS;  // data parallelism: seconds blocked waiting on collectives
  std::vector<BeyondPlan> beyondPlan;  // arena runs, this process's rank: the largest excesses first
  // Off the host: the step where the measured peak was reached (this process's rank).
  std::optional<BeyondPlan> peakStep;
  // Validation while training: the evaluation step's highest measured peak and its plan's.
  std::optional<std::int64_t> evalPeakBytesMeasured, evalPeakBytesPlanned;
};

struct RunMetrics {
  std::string model;
  int intraOpThreads = 0;  // ATen's intra-op threads during the run (0: not recorded)
  BlasInfo blas;           // the BLAS kernels the run used (runtime/kernels/blas_kernels.h)
  std::vector<StepMetrics> steps;
  std::vector<RankMetrics> ranks;
};

std::string metricsToJson(const RunMetrics& metrics);
// Written atomically.
Status writeMetrics(const std::string& path, const RunMetrics& metrics);

}  // namespace gradc::runtime
