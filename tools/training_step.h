// The training step as the CLI builds it, shared by `gradc compile` (plans, summaries) and
// `gradc train`: forward graph -> [data-parallel partition] -> micro-batching or autodiff ->
// [gradient collectives] -> optimizer -> dce -> remat under the byte budget -> schedule ->
// memory plan. Also the flags both commands take: --budget, --remat, --micro-batches, and
// --devices, --loss-placement, --bucket-mib.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ir/graph.h"
#include "passes/data_parallel.h"
#include "passes/memory_plan.h"
#include "passes/optimizer.h"
#include "passes/remat.h"
#include "runtime/arena_plan.h"

namespace gradc::tools {

struct MemoryFlags {
  std::string budget;              // "" = no budget
  std::string remat;               // "" = auto with a budget, none without
  std::string microBatches = "1";  // a count, or "auto"

  void addTo(CLI::App& cmd);
};

// Data parallelism: --devices, --loss-placement, --bucket-mib (compile and train).
struct ParallelFlags {
  int devices = 1;
  std::string lossPlacement = "local";
  double bucketMiB = 25;      // as PyTorch DDP's bucket_cap_mb
  double firstBucketMiB = 1;  // the first bucket, small so that communication starts early

  void addTo(CLI::App& cmd);
  // The pass options of one rank; an Error for bad flag values.
  Expected<passes::DataParallelOptions> forRank(int rank) const;
};

struct TrainingStep {
  ir::Graph graph;  // scheduled
  passes::RematReport remat;
  passes::MemoryPlan plan;
  int microBatches = 1;
};

// The step, or nullopt after printing the error (exitCode says which).
// With `parallel` (world > 1): the step of that rank, partitioned first, so the budget is per
// device and applies to the rank's shapes.
std::optional<TrainingStep> buildTrainingStep(const ir::Graph& forward, const passes::OptimizerOptions& optimizer,
                                              const MemoryFlags& flags, int& exitCode,
                                              const passes::DataParallelOptions& parallel = {});

// What the runtime executes of a plan: every buffer's offset and interval.
runtime::ArenaPlan arenaPlanOf(const passes::MemoryPlan& plan);

// One line for the log: strategy, micro-batches, predicted peak vs budget, recompute overhead.
std::string describeStep(const TrainingStep& step);

}  // namespace gradc::tools
