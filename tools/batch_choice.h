// `--set NAME=auto` with --budget, on gradc compile and gradc train: the largest batch whose
// training step fits the budget, found before the first step by the planner
// (passes/plan/batch_search.h), then compiled like any explicit `--set NAME=B`.
//
// The dim: NAME is the spec dim asked for (`--set batch=auto`). It must size the batched
// inputs: at every batch probed, the inputs' common leading extent (passes::batchSize) must be
// the dim's value. A spec whose inputs have no batch axis, or whose dim sizes something else,
// is refused with what its inputs are; a spec without the dim gets the frontend's `--set`
// error (with the dims it has).
//
// Per rank: with --devices N, the search is over each rank's batch b (the spec is lowered at
// N x b and rank 0's shard planned); the report says the global batch too. Every probed batch
// is a multiple of --batch-multiple and of a fixed --micro-batches K (each micro-batch gets an
// equal share). The probes plan with the request's flags (--remat, --micro-batches,
// --loss-chunks, --shard, --objective, --max-recompute, --device-reserve), for the kernel
// threads the caller's plan will be made for, so the step compiled afterwards at the chosen
// batch is the step the search accepted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "passes/plan/batch_search.h"
#include "tools/training_step.h"

namespace gradc::tools {

struct BatchChoice {
  std::string dim;
  int world = 1;
  std::int64_t multiple = 1;
  std::int64_t budgetBytes = 0;
  passes::BatchSearchResult search;  // the largest batch that fits
  // --objective throughput: the batch with the most predicted samples per second among the
  // candidates (every fitting batch probed, the largest halved up to four times, and the
  // largest that fits without recompute), each planned for the least predicted step time.
  bool throughput = false;
  passes::BatchProbe chosen;               // the answer (the largest, unless throughput)
  std::vector<passes::BatchProbe> candidates;  // throughput: the batches planned beyond the search
  int zeroRecomputeProbes = 0;             // throughput: the search for the largest without recompute
  double seconds = 0;  // the whole search

  std::int64_t perRank() const { return chosen.batch; }
  std::int64_t global() const { return chosen.batch * world; }
  double samplesPerSecond(const passes::BatchProbe& p) const {
    return p.stepSeconds > 0 ? static_cast<double>(p.batch * world) / p.stepSeconds : 0;
  }
  // One line: the chosen batch, its peak, the next batch's smallest feasible budget, the cost.
  std::string describe() const;
  nlohmann::json toJson() const;  // the manifest's "batch_search"
};

struct BatchRequest {
  std::string spec;                  // the spec file
  const MemoryFlags* memory = nullptr;
  const ParallelFlags* parallel = nullptr;
  passes::OptimizerOptions optimizer;
  int kernelThreads = 0;             // what the plan is made for (0: the graph records none)
};

// When `sets` holds NAME=auto: searches the batch and rewrites that entry as NAME=<global batch>,
// with the report in `choice`. Without one, checks that --batch-multiple was not given alone.
// Returns the exit code (kExitOk, or the error's after printing it).
int resolveAutoBatch(const BatchRequest& request, std::vector<std::string>& sets, std::optional<BatchChoice>& choice);

}  // namespace gradc::tools
