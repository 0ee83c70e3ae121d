// Training progress on the terminal: a live, redrawn bar (step, loss, tokens/s, ETA) when
// stderr is a terminal; plain log lines otherwise (CI logs, files, pipes).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/train/metrics.h"

namespace gradc::runtime {

class Progress {
 public:
  // totalSteps: the step the run ends at; firstStep: where it starts (> 1 when resumed).
  Progress(std::int64_t firstStep, std::int64_t totalSteps, std::FILE* out = stderr);
  ~Progress();
  void update(const StepMetrics& m);
  // Prints a line that must not be overwritten by the bar (e.g. "saved checkpoint ...").
  void note(const std::string& line);
  void finish();
  // What the throughput counts: "tok/s" (the default: language models) or "examples/s".
  void setRateUnit(std::string unit) { rateUnit_ = std::move(unit); }

 private:
  std::string rateUnit_ = "tok/s";
  std::int64_t firstStep_;
  std::int64_t totalSteps_;
  std::FILE* out_;
  bool live_;
  bool barShown_ = false;
  double elapsedS_ = 0;
  std::int64_t lastLogged_ = 0;
  std::string lastVal_;  // the live bar's latest validation loss
};

}  // namespace gradc::runtime
