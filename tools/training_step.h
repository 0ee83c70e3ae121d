// The training step as the CLI builds it, shared by `gradc compile` (plans, summaries) and
// `gradc train`: forward graph -> micro-batching or autodiff -> optimizer -> dce -> remat under
// the byte budget -> schedule -> memory plan. Also the memory flags both commands take:
// --budget, --remat, --micro-batches.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ir/graph.h"
#include "passes/memory_plan.h"
#include "passes/optimizer.h"
#include "passes/remat.h"

namespace gradc::tools {

struct MemoryFlags {
  std::string budget;              // "" = no budget
  std::string remat;               // "" = auto with a budget, none without
  std::string microBatches = "1";  // a count, or "auto"

  void addTo(CLI::App& cmd);
};

struct TrainingStep {
  ir::Graph graph;  // scheduled
  passes::RematReport remat;
  passes::MemoryPlan plan;
  int microBatches = 1;
};

// The step, or nullopt after printing the error (exitCode says which).
std::optional<TrainingStep> buildTrainingStep(const ir::Graph& forward, const passes::OptimizerOptions& optimizer,
                                              const MemoryFlags& flags, int& exitCode);

// One line for the log: strategy, micro-batches, predicted peak vs budget, recompute overhead.
std::string describeStep(const TrainingStep& step);

}  // namespace gradc::tools
