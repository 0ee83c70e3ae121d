// The training step as the CLI builds it, shared by `gradc compile` (plans, artifacts) and
// `gradc train`: forward graph -> [data-parallel partition] -> micro-batching or autodiff ->
// [gradient collectives] -> optimizer -> dce -> remat under the byte budget -> schedule ->
// memory plan, each a pass of one PassManager run (passes/plan/training_planner.h). Also the flags
// both commands take: --budget, --remat, --micro-batches, --loss-chunks, and
// --devices, --loss-placement, --bucket-mib.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ir/graph.h"
#include "passes/data_parallel.h"
#include "passes/memory/memory_plan.h"
#include "passes/micro_batch.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/remat.h"

namespace gradc::tools {

struct MemoryFlags {
  std::string budget;              // "" = no budget
  std::string remat;               // "" = auto with a budget, none without
  std::string microBatches = "1";  // a count, or "auto"
  std::string lossChunks = "auto";  // a count, "auto" or "off" (passes/fuse_loss.h)
  bool noFuse = false;              // --no-fuse: no elementwise fusion (passes/fuse.h)
  std::string deviceReserve;        // --device-reserve: "" (the device's), a device name or a size
  // The device kind the plan's kernel workspaces are sized for (ir::Graph::kernelTarget):
  // compile's --device, or the device gradc train runs on.
  std::string device = "cpu";
  std::string objective = "least-recompute";  // --objective (passes/plan/objective.h)
  double maxRecompute = -1;                   // --max-recompute PCT; negative: no cap
  std::int64_t batchMultiple = 0;             // --batch-multiple N with --set batch=auto; 0: not given
  std::string costTable;                      // --cost-table FILE for --objective throughput ("": probe)

  void addTo(CLI::App& cmd);
};

// Data parallelism: --devices, --loss-placement, --bucket-mib (compile and train).
struct ParallelFlags {
  int devices = 1;
  std::string lossPlacement = "local";
  double bucketMiB = 25;      // as PyTorch DDP's bucket_cap_mb
  double firstBucketMiB = 1;  // the first bucket, small so that communication starts early
  std::string shard = "auto";  // ZeRO stage: 0, 1, 2, 3, or auto (chosen with --budget; 0 without)
  bool oneRankCollectives = false;  // --one-rank-collectives (passes/data_parallel.h)
  std::string keepGathered = "auto";  // stage 3: groups that keep their gathered parameters (N, all, auto)
  bool noPrefetch = false;         // stage 3: each all-gather starts at its group, not one ahead

  void addTo(CLI::App& cmd);
  // The pass options of one rank; an Error for bad flag values.
  Expected<passes::DataParallelOptions> forRank(int rank) const;
};

// The optimizer: --optimizer, --lr, --min-lr, --momentum, --weight-decay, --clip-norm,
// --warmup-steps, --decay-steps (compile and train; they become attributes of the step's graph).
struct OptimizerFlags {
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double minLr = -1;
  double momentum = 0.9;
  double weightDecay = -1;
  double clipNorm = 0;
  std::vector<double> betas;    // --betas B1,B2 (AdamW); empty: 0.9, 0.999
  double eps = 1e-8;            // --eps (AdamW)
  std::string decay = "all";    // --decay all|matrices
  std::int64_t warmupSteps = 0;
  std::int64_t decaySteps = 0;

  void addTo(CLI::App& cmd);
  passes::OptimizerOptions options() const;
};

// Intra-op threads each rank's kernels will run with: OMP_NUM_THREADS when set, else the cores
// available to the process (affinity mask, cgroup quota; runtime/core/cpu_cores.h) divided among the
// ranks (what the launcher gives each worker).
int kernelThreadsFor(int devices);

// One rank's step: scheduled graph, report (with the plan's configuration), memory plan and the
// decision the other ranks apply.
using TrainingStep = passes::TrainingStepResult;

// --budget, --remat, --micro-batches and --loss-chunks parsed once into the options every rank's step is
// built with: from here the budget is one std::optional of bytes, down to the plan. nullopt
// after printing the error (exit code 2).
// --device-reserve in bytes (when not given, the reserve of the device the plan is made for);
// nullopt after printing the error.
std::optional<std::int64_t> parseDeviceReserve(const MemoryFlags& flags);
// The --device values: every backend's name (ir::kernelTargets()).
std::vector<std::string> deviceNames();
// MemoryFlags::device as the graph's kernel target (ir/kernel_target.h; checked where it is given).
const ir::KernelTarget& kernelTargetOf(const MemoryFlags& flags);
// `kernelThreads`: the intra-op threads the step will run with (--objective throughput probes
// the machine with them, and warns when a --cost-table was measured with others).
std::optional<passes::TrainingPlanOptions> parseTrainingPlanOptions(const MemoryFlags& flags,
                                                                    const passes::OptimizerOptions& optimizer,
                                                                    int kernelThreads);

// The step, or nullopt after printing the error (exitCode says which): the training pipeline
// of passes/plan/training_planner.h, under a PassManager with `pm` (--print-after-all, --dump-dir).
// With `parallel` (world > 1): the step of that rank, partitioned first, so the budget is per
// device and applies to the rank's shapes.
// Given `decided` (another rank's), the rank applies that decision instead of searching when its
// graph is built like the deciding rank's (passes/plan/training_planner.h).
std::optional<TrainingStep> buildTrainingStep(const ir::Graph& forward, const passes::TrainingPlanOptions& options,
                                              int& exitCode, const passes::DataParallelOptions& parallel = {},
                                              const passes::PassManagerOptions& pm = {},
                                              const passes::PlanDecision* decided = nullptr);

// Which ranks' steps buildRankSteps returns.
enum class RankSteps {
  Every,     // every rank's, in rank order (an artifact runs them all)
  Distinct,  // rank 0's, then one step per other graph: rank 1's when the loss placement is gather
             // (ranks 1.. share one graph), every rank's under ZeRO (each owns other shards)
};
// The data-parallel ranks' steps, decided once: rank 0's search decides the configuration and
// recompute plan, and every other rank applies that decision to its own shard (searching only
// when its graph is not built like rank 0's, as under the gather placement, with rank 0's ZeRO
// stage). A budget fits the largest rank peak: when a rank's applied plan peaks over it (its
// shards' workspaces are larger), that rank decides instead and the ranks are built again.
// `pm`'s dump directory gets a rankN subdirectory per rank when world > 1. nullopt after
// printing the error (exitCode says which).
std::optional<std::vector<TrainingStep>> buildRankSteps(const ir::Graph& forward,
                                                        const passes::TrainingPlanOptions& options,
                                                        const ParallelFlags& parallel, RankSteps which,
                                                        const passes::PassManagerOptions& pm, int& exitCode);

// One line for the log: strategy, micro-batches, predicted peak vs budget, recompute overhead.
std::string describeStep(const TrainingStep& step);

}  // namespace gradc::tools
