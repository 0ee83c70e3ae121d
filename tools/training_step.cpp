#include "tools/training_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>

#include "ir/kernel_target.h"
#include "passes/budget.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/schedule.h"
#include "passes/shard_params.h"
#include "passes/shard_state.h"
#include "runtime/core/cpu_cores.h"
#include "runtime/train/cost_probe.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"

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
  cmd.add_option("--loss-chunks", lossChunks,
                 "Fuse the LM head into cross_entropy and compute it K token chunks at a time, never holding all "
                 "the logits; auto: only when that is the cheapest way to fit --budget; off: never")
      ->capture_default_str();
  cmd.add_option("--device-reserve", deviceReserve,
                 "Memory the device's libraries hold beside the plan, kept free of --budget: a size, or a device "
                 "whose reserve to keep (cuda: cuBLAS's workspaces as gradc's CUDA device fixes them, 36 MiB; cpu: "
                 "none). Default: the reserve of the device the plan is made for");
  cmd.add_option("--objective", objective,
                 "Which plan that fits --budget is chosen: least-recompute (the fewest recompute FLOPs, then the "
                 "fewest micro-batches, the lowest ZeRO stage, the fewest loss chunks), least-peak (the least "
                 "memory; with --max-recompute, the least memory that much extra compute buys) or throughput (the "
                 "least predicted step time; with --set batch=auto, the batch with the most samples per second)")
      ->check(CLI::IsMember({"least-recompute", "least-peak", "throughput"}))
      ->capture_default_str();
  cmd.add_option("--max-recompute", maxRecompute,
                 "Consider only plans that recompute at most PCT percent of one forward's FLOPs")
      ->check(numberIn(0, 1e9, /*closedHigh=*/true));
  cmd.add_option("--cost-table", costTable,
                 "With --objective throughput: the kernel-time table step times are predicted from (written by "
                 "gradc train --profile --cost-table-out FILE); default: a one-second probe of this machine");
  cmd.add_option("--batch-multiple", batchMultiple,
                 "With --set batch=auto: the batch searched is a multiple of N (per rank with --devices)")
      ->check(integerIn(1, 1 << 20));
  cmd.add_flag("--no-fuse", noFuse,
               "Run every elementwise op as its own kernel (default: regions of elementwise ops are fused into "
               "generated kernels whose intermediates are never stored)");
}

void OptimizerFlags::addTo(CLI::App& cmd) {
  cmd.add_option("--optimizer", optimizer, "sgd or adamw")->check(CLI::IsMember({"sgd", "adamw"}))->capture_default_str();
  // The step holds learning rates as f32 scalars: beyond the largest f32 they would not convert.
  constexpr double kLargestF32 = 3.4028234663852886e38;
  cmd.add_option("--lr", lr, "Peak learning rate")
      ->check(positiveNumber())
      ->check(numberIn(0, kLargestF32, /*closedHigh=*/true))
      ->capture_default_str();
  cmd.add_option("--min-lr", minLr, "Floor of the cosine decay (default 0.1 x lr)")
      ->check(numberIn(0, kLargestF32, /*closedHigh=*/true));
  cmd.add_option("--momentum", momentum, "SGD momentum (0: plain SGD)")
      ->check(numberIn(0, 1, /*closedHigh=*/false))
      ->capture_default_str();
  cmd.add_option("--weight-decay", weightDecay, "Weight decay (default: 0 for SGD, 0.01 for AdamW)")
      ->check(nonNegativeNumber());
  cmd.add_option("--betas", betas, "AdamW's moment decays B1,B2 (torch.optim.AdamW's betas)")
      ->delimiter(',')
      ->expected(2)
      ->check(numberIn(0, 1, /*closedHigh=*/false));
  cmd.add_option("--eps", eps, "AdamW's epsilon, added to the root of the second moment")
      ->check(nonNegativeNumber())
      ->capture_default_str();
  cmd.add_option("--decay", decay,
                 "Which parameters weight decay applies to: all (as torch.optim.AdamW(model.parameters())), or "
                 "matrices (rank >= 2: linear, conv and embedding weights; never biases or norm weights, as "
                 "nanoGPT and Hugging Face's Trainer group them)")
      ->check(CLI::IsMember({"all", "matrices"}))
      ->capture_default_str();
  cmd.add_option("--clip-norm", clipNorm, "Clip the global gradient norm to this value (0: off)")
      ->check(nonNegativeNumber())
      ->capture_default_str();
  cmd.add_option("--warmup-steps", warmupSteps, "Linear learning-rate warmup")
      ->check(nonNegativeInteger())
      ->capture_default_str();
  cmd.add_option("--decay-steps", decaySteps, "Cosine decay length after warmup (0: constant lr)")
      ->check(nonNegativeInteger())
      ->capture_default_str();
}

passes::OptimizerOptions OptimizerFlags::options() const {
  passes::OptimizerOptions opt;
  opt.kind = optimizer == "sgd" ? passes::OptimizerOptions::Kind::Sgd : passes::OptimizerOptions::Kind::AdamW;
  opt.lr = lr;
  opt.momentum = momentum;
  opt.weightDecay = weightDecay;
  opt.clipNorm = clipNorm;
  if (betas.size() == 2) {
    opt.beta1 = betas[0];
    opt.beta2 = betas[1];
  }
  opt.eps = eps;
  opt.decay = decay == "matrices" ? passes::OptimizerOptions::DecayGroups::Matrices
                                  : passes::OptimizerOptions::DecayGroups::All;
  opt.warmupSteps = warmupSteps;
  // Without --decay-steps the learning rate stays at --lr after warmup (as in plain PyTorch);
  // with it, it follows a cosine down to --min-lr over that many steps.
  opt.totalSteps = warmupSteps + std::max<std::int64_t>(decaySteps, 1);
  opt.minLr = decaySteps > 0 ? minLr : lr;
  return opt;
}

int kernelThreadsFor(int devices) {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 4096) return static_cast<int>(n);
  }
  return std::max(1, runtime::availableCores() / std::max(1, devices));
}

void ParallelFlags::addTo(CLI::App& cmd) {
  cmd.add_option("--devices", devices,
                 "Data-parallel ranks: the batch is split over N processes (CPU ranks over Gloo), each computing "
                 "the loss of its own shard; gradients are all-reduced in buckets")
      ->check(integerIn(1, 4096))
      ->capture_default_str();
  cmd.add_option("--loss-placement", lossPlacement,
                 "local: every rank computes its shard's loss (balanced); gather: outputs gathered onto rank 0 for "
                 "the loss, as torch.nn.DataParallel (the baseline)")
      ->check(CLI::IsMember({"local", "gather"}))
      ->capture_default_str();
  cmd.add_option("--shard", shard,
                 "ZeRO stage over the data-parallel ranks: 0 replicated; 1 each rank keeps and updates 1/N of the "
                 "optimizer state, then the parameters are all-gathered; 2 the gradients are also reduce-scattered, "
                 "so each rank keeps 1/N of them; 3 the parameters too, each bucket all-gathered just before its "
                 "forward and again before its backward and its recompute (FSDP); auto: the least that fits --budget (0 without one)")
      ->check(CLI::IsMember({"0", "1", "2", "3", "auto"}))
      ->capture_default_str();
  cmd.add_option("--keep-gathered", keepGathered,
                 "--shard 3: how many parameter buckets, counted back from the last the forward gathers, keep their "
                 "gathered parameters from the forward to the backward instead of gathering them again (N or all); "
                 "auto: with --budget the most that fit (all, half, a quarter, ..., none), without one none")
      ->capture_default_str();
  cmd.add_flag("--no-prefetch", noPrefetch,
               "--shard 3: start each bucket's all-gather where its parameters are first read, not one bucket ahead");
  cmd.add_option("--bucket-mib", bucketMiB, "Gradient all-reduce bucket size in MiB (the first bucket: 1 MiB)")
      ->check(numberIn(1.0 / 1024, 1 << 20, /*closedHigh=*/true))
      ->capture_default_str();
  cmd.add_flag("--one-rank-collectives", oneRankCollectives,
               "With --devices 1: partition and all-reduce anyway, as DDP does with one process (the collectives "
               "are identities), so one device runs the communication path end to end");
}

Expected<passes::DataParallelOptions> ParallelFlags::forRank(int rank) const {
  passes::DataParallelOptions o;
  o.world = devices;
  o.rank = rank;
  o.oneRankCollectives = oneRankCollectives;
  Expected<passes::LossPlacement> placement = passes::parseLossPlacement(lossPlacement);
  if (!placement) return placement.error();
  o.placement = *placement;
  Expected<std::optional<passes::ZeroStage>> stage = passes::parseZeroStage(shard);
  if (!stage) return stage.error();
  if (*stage && **stage != passes::ZeroStage::Replicated && devices == 1)
    return Error{"--shard " + shard + " partitions state over data-parallel ranks; with --devices 1 there is nothing "
                 "to shard (use --devices N)"};
  o.shard = *stage;
  if (keepGathered == "all") {
    o.keepGathered = -1;
  } else if (keepGathered == "auto") {
    o.keepGathered = passes::kKeepGatheredAuto;
  } else {
    char* end = nullptr;
    const long n = std::strtol(keepGathered.c_str(), &end, 10);
    if (keepGathered.empty() || *end != '\0' || n < 0 || n > 1 << 20)
      return Error{"--keep-gathered expects a count of buckets, all or auto, got '" + keepGathered + "'"};
    o.keepGathered = static_cast<int>(n);
  }
  o.prefetch = !noPrefetch;
  if (o.shard && *o.shard != passes::ZeroStage::Parameters && (keepGathered != "auto" || noPrefetch))
    return Error{std::string(noPrefetch ? "--no-prefetch" : "--keep-gathered") +
                 " is about gathering sharded parameters, which only --shard 3 (or auto) does; this run has --shard " +
                 shard};
  auto bytes = [](double mib) { return static_cast<std::int64_t>(mib * 1024 * 1024); };
  if (bytes(bucketMiB) < 1) return Error{"--bucket-mib must be positive"};
  o.bucketBytes = bytes(bucketMiB);
  o.firstBucketBytes = std::min(o.bucketBytes, bytes(firstBucketMiB));
  return o;
}

std::vector<std::string> deviceNames() {
  std::vector<std::string> names;
  for (const ir::KernelTarget* t : ir::kernelTargets()) names.emplace_back(t->name());
  return names;
}

const ir::KernelTarget& kernelTargetOf(const MemoryFlags& flags) {
  const ir::KernelTarget* named = ir::findKernelTarget(flags.device);
  return named ? *named : ir::defaultKernelTarget();
}

std::optional<std::int64_t> parseDeviceReserve(const MemoryFlags& flags) {
  if (flags.deviceReserve.empty()) return kernelTargetOf(flags).libraryReserveBytes();
  if (const ir::KernelTarget* backend = ir::findKernelTarget(flags.deviceReserve))
    return backend->libraryReserveBytes();
  Expected<std::int64_t> bytes = passes::parseBytes(flags.deviceReserve);
  if (!bytes) {
    std::cerr << "gradc: error: --device-reserve: " << bytes.error().message << " (or a device: "
              << ir::kernelTargetNames() << ")\n";
    return std::nullopt;
  }
  return *bytes;
}

std::optional<passes::TrainingPlanOptions> parseTrainingPlanOptions(const MemoryFlags& flags,
                                                                    const passes::OptimizerOptions& optimizer,
                                                                    int kernelThreads) {
  passes::TrainingPlanOptions options;
  options.optimizer = optimizer;
  if (!flags.budget.empty()) {
    Expected<std::int64_t> bytes = passes::parseBytes(flags.budget);
    if (!bytes) {
      std::cerr << "gradc: error: --budget: " << bytes.error().message << "\n";
      return std::nullopt;
    }
    options.plan.budgetBytes = *bytes;
  }
  if (std::optional<std::int64_t> reserve = parseDeviceReserve(flags)) options.plan.reserveBytes = *reserve;
  else return std::nullopt;
  std::string strategy = !flags.remat.empty() ? flags.remat : options.plan.budgetBytes ? "auto" : "none";
  Expected<passes::RematStrategy> parsed = passes::parseRematStrategy(strategy);
  if (!parsed) {
    std::cerr << "gradc: error: --remat: " << parsed.error().message << "\n";
    return std::nullopt;
  }
  options.remat = *parsed;
  Expected<passes::Objective> objective = passes::parseObjective(flags.objective, flags.maxRecompute);
  if (!objective) {
    std::cerr << "gradc: error: " << objective.error().message << "\n";
    return std::nullopt;
  }
  options.plan.objective = *objective;
  if (!flags.costTable.empty() && objective->goal != passes::PlanGoal::Throughput) {
    std::cerr << "gradc: error: --cost-table predicts step times for --objective throughput; give that too\n";
    return std::nullopt;
  }
  if (objective->goal == passes::PlanGoal::Throughput) {
    // One table per file (or probe) and thread count per process: the probe takes about a second.
    static std::map<std::pair<std::string, int>, std::shared_ptr<const ir::CostTable>> loaded;
    std::shared_ptr<const ir::CostTable>& table = loaded[{flags.costTable, kernelThreads}];
    if (!table) {
      if (flags.costTable.empty()) {
        table = std::make_shared<const ir::CostTable>(runtime::probeCostTable(kernelThreads));
      } else {
        Expected<ir::CostTable> read = runtime::readCostTable(flags.costTable);
        if (!read) {
          std::cerr << "gradc: error: " << read.error().message << "\n";
          return std::nullopt;
        }
        if (read->kernelThreads != kernelThreads)
          std::cerr << "gradc: warning: --cost-table " << flags.costTable << " was measured with "
                    << read->kernelThreads << " intra-op thread(s), and this step runs with " << kernelThreads
                    << ": its predicted times may rank plans differently\n";
        table = std::make_shared<const ir::CostTable>(std::move(*read));
      }
    }
    options.plan.objective.costs = table;
  }
  if (flags.microBatches == "auto") {
    if (!options.plan.budgetBytes) {
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
  Expected<passes::LossChunking> chunking = passes::parseLossChunks(flags.lossChunks);
  if (!chunking) {
    std::cerr << "gradc: error: " << chunking.error().message << "\n";
    return std::nullopt;
  }
  options.lossChunks = *chunking;
  options.fuseElementwise = !flags.noFuse;
  return options;
}

std::optional<TrainingStep> buildTrainingStep(const ir::Graph& forward, const passes::TrainingPlanOptions& planOptions,
                                              int& exitCode, const passes::DataParallelOptions& parallel,
                                              const passes::PassManagerOptions& pm,
                                              const passes::PlanDecision* decided) {
  exitCode = kExitUserError;
  // Ranks other than 0 may have their own graph (loss placement gather): say whose error it is.
  const std::string who = parallel.world > 1 && parallel.rank > 0
                              ? "rank " + std::to_string(parallel.rank) + " (loss placement " +
                                    std::string(passes::lossPlacementName(parallel.placement)) + "): "
                              : "";
  passes::TrainingPlanOptions options = planOptions;
  std::optional<ir::Graph> shard;
  if (parallel.communicates()) {
    // A batch that does not split over the ranks is the user's --devices.
    Expected<ir::Graph> p = passes::partitionForward(forward, parallel);
    if (!p) {
      std::cerr << "gradc: error: " << who << "--devices " << parallel.world << ": " << p.error().message << "\n";
      exitCode = exitCodeFor(p.error());
      return std::nullopt;
    }
    shard = std::move(*p);
    options.dataParallel = parallel;
  }
  Expected<passes::TrainingStepResult> built =
      passes::buildTrainingStepPipeline(forward, shard ? &*shard : nullptr, options, pm, decided);
  if (!built) {
    std::cerr << "gradc: error: " << who << built.error().message << "\n";
    exitCode = exitCodeFor(built.error());
    return std::nullopt;
  }
  TrainingStep step = std::move(*built);
  // A decision applied from another rank is checked against the budget by buildRankSteps.
  if (options.plan.budgetBytes && !step.appliedDecision && step.plan.peakBytes > options.plan.planBudget()) {
    // Remat checks its own prediction; the schedule never raises the peak. A failure here is a bug.
    std::cerr << "gradc: error: internal: the scheduled step needs " << step.plan.peakBytes
              << " bytes, over the budget of " << options.plan.planBudget() << "\n";
    exitCode = kExitInternal;
    return std::nullopt;
  }
  exitCode = kExitOk;
  return step;
}

std::optional<std::vector<TrainingStep>> buildRankSteps(const ir::Graph& forward,
                                                        const passes::TrainingPlanOptions& options,
                                                        const ParallelFlags& flags, RankSteps which,
                                                        const passes::PassManagerOptions& pm, int& exitCode) {
  const int world = flags.devices;
  auto build = [&](int rank, const passes::PlanDecision* decided,
                   std::optional<passes::ZeroStage> stage) -> std::optional<TrainingStep> {
    Expected<passes::DataParallelOptions> parallel = flags.forRank(rank);
    if (!parallel) {
      std::cerr << "gradc: error: " << parallel.error().message << "\n";
      exitCode = kExitUserError;
      return std::nullopt;
    }
    if (stage) parallel->shard = *stage;  // every rank runs the same collectives
    if (decided) parallel->keepGathered = decided->config().keptGroups;
    passes::PassManagerOptions rankPm = pm;
    if (rankPm.dumpDir && world > 1) *rankPm.dumpDir /= "rank" + std::to_string(rank);
    return buildTrainingStep(forward, options, exitCode, *parallel, rankPm, decided);
  };
  int decider = 0;
  // Each restart moves the decision to a rank whose peak under the last one was larger.
  for (int attempt = 0; attempt < world; ++attempt) {
    std::optional<TrainingStep> decided = build(decider, nullptr, std::nullopt);
    if (!decided) return std::nullopt;
    const passes::ZeroStage stage = decided->report.config.zero;
    std::vector<int> ranks{0};
    if (which == RankSteps::Every || stage != passes::ZeroStage::Replicated)
      for (int r = 1; r < world; ++r) ranks.push_back(r);
    else if (world > 1 && flags.lossPlacement == "gather")
      ranks.push_back(1);
    std::vector<TrainingStep> steps;
    std::optional<int> larger;
    for (int rank : ranks) {
      if (rank == decider) {
        steps.push_back(std::move(*decided));
        decided.reset();
        continue;
      }
      const passes::PlanDecision& decision = decided ? decided->decision : steps[static_cast<size_t>(decider)].decision;
      std::optional<TrainingStep> step = build(rank, &decision, stage);
      if (!step) return std::nullopt;
      if (options.plan.budgetBytes && step->plan.peakBytes > options.plan.planBudget()) {
        larger = rank;
        break;
      }
      steps.push_back(std::move(*step));
    }
    if (!larger) return steps;
    decider = *larger;
  }
  std::cerr << "gradc: error: internal: no data-parallel rank's plan fits every rank under the budget\n";
  exitCode = kExitInternal;
  return std::nullopt;
}

std::string describeStep(const TrainingStep& step) {
  const passes::PlanConfig& config = step.report.config;
  std::string line = fmt::format("memory plan: remat {}, {} micro-batch{}, predicted peak {}",
                                 passes::rematStrategyName(step.report.chosen), config.microBatches,
                                 config.microBatches == 1 ? "" : "es", passes::formatBytes(step.plan.peakBytes));
  if (step.plan.reserveBytes > 0)
    line += fmt::format(" + {} for the device's libraries", passes::formatBytes(step.plan.reserveBytes));
  if (step.plan.budgetBytes) line += fmt::format(" of {} budget", passes::formatBytes(*step.plan.budgetBytes));
  if (step.report.recomputeFlops > 0)
    line += fmt::format(", recompute {:.1f}% of a forward", step.report.recomputePercent());
  if (config.fusedLoss())
    line += fmt::format(", fused loss in {} chunk{}", config.lossChunks, config.lossChunks == 1 ? "" : "s");
  if (config.zero != passes::ZeroStage::Replicated)
    line += fmt::format(", ZeRO stage {} ({})", passes::zeroStageNumber(config.zero),
                        passes::zeroStageSummary(config.zero));
  if (config.zero == passes::ZeroStage::Parameters) line += ", " + passes::describeGathers(step.graph);
  if (step.report.predictedStepSeconds > 0)
    line += fmt::format(", predicted step time {:.3f} s", step.report.predictedStepSeconds);
  return line;
}

}  // namespace gradc::tools
