#include "tools/artifact_build.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <iostream>

#include "codegen/kernels.h"
#include "ir/device_mesh.h"
#include "ir/kernel_target.h"
#include "ir/op_table.h"
#include "ir/printer.h"
#include "passes/budget.h"
#include "passes/plan/training_planner.h"
#include "passes/shard_state.h"
#include "passes/unfuse.h"
#include "runtime/exec/plan_json.h"
#include "runtime/io/artifact.h"
#include "runtime/io/kernel_trust.h"
#include "runtime/io/sha256.h"
#include "runtime/kernels/generated_kernels.h"
#include "tools/batch_choice.h"
#include "tools/commands.h"
#include "tools/evaluation_step.h"
#include "tools/output.h"
#include "tools/spec_loading.h"

namespace gradc::tools {

namespace {

// The files of one rank's step, and of its evaluation and reference steps (shared by ranks whose
// graphs print alike).
struct GraphFiles {
  std::string graph, plan, kernels, ptx, tag, evalGraph, evalPlan, referenceGraph, referencePlan, ptxTag;
};

// Whether every collective of every rank sums a dtype the ranks' communicator can sum (the
// backend's description); says why on stderr when not.
bool communicatorSumsEverything(const std::vector<TrainingStep>& steps, const ir::KernelTarget& target, int world) {
  if (world == 1) return true;
  for (const TrainingStep& step : steps)
    for (const auto& n : step.graph.nodes())
      if (n->op().issuesCollective && n->numResults() > 0 && !target.sums(n->result(0)->type().dtype)) {
        const std::string dtype(ir::dtypeName(n->result(0)->type().dtype));
        std::cerr << "gradc: error: --devices " << world << ": " << target.ranks() << " communicate through "
                  << target.communicator() << ", which cannot sum " << dtype << " tensors (this model's gradients "
                  << "or loss are " << dtype << "); train it in f32, or on one device\n";
        return false;
      }
  return true;
}

// Every rank's evaluation step, planned inside its training step's arena (which grows to hold
// it when it must). Empty, with `unavailable` saying why, when the model has none: it still
// trains, and --val-data then says why.
std::vector<EvaluationStep> planEvaluations(const ir::Graph& forward, std::vector<TrainingStep>& steps, int world,
                                            std::string& unavailable) {
  std::vector<EvaluationStep> evals;
  for (int rank = 0; rank < world; ++rank) {
    Expected<EvaluationStep> e = buildEvaluationStep(forward, steps[static_cast<size_t>(rank)], world);
    if (!e) {
      unavailable = e.error().message;
      return {};
    }
    // Every rank evaluates its rows at once, in the same number of runs (under stage 3 each
    // run gathers the parameters: a rank running more would wait for the others forever).
    if (!evals.empty() && e->splits != evals.front().splits) {
      unavailable = "rank " + std::to_string(rank) + "'s evaluation needs " + std::to_string(e->splits) +
                    " runs per batch to fit its budget, rank 0's " + std::to_string(evals.front().splits);
      return {};
    }
    evals.push_back(std::move(*e));
  }
  for (size_t rank = 0; rank < evals.size(); ++rank) {
    passes::MemoryPlan& plan = steps[rank].plan;
    plan.arenaBytes = evals[rank].plan.arenaBytes;
    for (passes::RankPlan& rp : plan.ranks) rp.arenaBytes = plan.arenaBytes;
  }
  return evals;
}

// A step that runs generated kernels: the shared object (tagged with this user's key), the
// same step without them (the reference step, for runs that do not load them) and, when asked,
// the kernels as PTX. `graphFile` indexes the step's graph in `files`. An exit code.
int addGeneratedKernelFiles(const ArtifactRequest& r, const TrainingStep& step, const EvaluationStep* eval,
                            const std::string& stem, size_t graphFile, std::vector<runtime::ArtifactFile>& files,
                            GraphFiles& g, std::string* referenceSummary) {
  Expected<std::string> so = codegen::buildCpuSharedObject(step.graph);
  if (!so) {
    std::cerr << "gradc: error: generating the fused kernels: " << so.error().message
              << " (--no-fuse compiles without them)\n";
    return kExitInternal;
  }
  g.kernels = stem + ".kernels.so";
  // Tagged with this user's key, so that the runtime loads them without --trust-kernels.
  Expected<std::string> key = runtime::kernelKey(/*create=*/true);
  if (key)
    g.tag = runtime::kernelsTag(*key, *so, files[graphFile].contents);
  else if (!r.quiet)
    std::cerr << "gradc: warning: the artifact's kernels are not tagged (" << key.error().message
              << "): running it will need --trust-kernels\n";
  files.push_back({g.kernels, std::move(*so)});
  // The same step without the generated kernels, for runs that do not load them.
  Expected<passes::ReferenceStep> reference = passes::referenceStep(step.graph, step.plan);
  if (!reference) {
    std::cerr << "gradc: error: the reference step: " << reference.error().message << "\n";
    return kExitInternal;
  }
  if (eval) {
    passes::MemoryPlan& plan = reference->plan;
    plan.arenaBytes = std::max(plan.arenaBytes, eval->plan.plan.arenaBytes);
    for (passes::RankPlan& rp : plan.ranks) rp.arenaBytes = plan.arenaBytes;
  }
  if (referenceSummary)
    *referenceSummary = fmt::format(
        "reference step (no generated kernels): {} fused region{} as {} ATen kernels, {} one-pass update{} as "
        "ATen's, peak {} (the compiled step's {})",
        reference->stats.regions, reference->stats.regions == 1 ? "" : "s", reference->stats.nodes,
        reference->stats.onePassUpdates, reference->stats.onePassUpdates == 1 ? "" : "s",
        passes::formatBytes(reference->plan.peakBytes), passes::formatBytes(step.plan.peakBytes));
  g.referenceGraph = stem + ".reference.gir";
  g.referencePlan = stem + ".reference.plan.json";
  files.push_back({g.referenceGraph, ir::printGraph(reference->graph)});
  files.push_back({g.referencePlan, runtime::planToJson(reference->plan)});
  if (r.withPtx) {
    Expected<std::string> ptx = codegen::emitPtx(step.graph);
    if (ptx) {
      g.ptx = stem + ".kernels.ptx";
      if (key) g.ptxTag = runtime::kernelsTag(*key, *ptx, files[graphFile].contents);
      files.push_back({g.ptx, std::move(*ptx)});
    } else if (!r.quiet) {
      std::cerr << "gradc: warning: no PTX for GPUs in the artifact: " << ptx.error().message << "\n";
    }
  }
  return kExitOk;
}

// The distinct graphs' files (a graph printed alike by several ranks is written once) and each
// rank's entry in the manifest. An exit code.
int addStepFiles(const ArtifactRequest& r, const std::vector<TrainingStep>& steps,
                 const std::vector<EvaluationStep>& evals, std::vector<runtime::ArtifactFile>& files,
                 runtime::ArtifactManifest& m, std::string& referenceSummary) {
  const int world = static_cast<int>(steps.size());
  std::vector<std::string> texts;  // of the distinct graphs, in file order
  std::vector<GraphFiles> graphFiles;  // per distinct graph
  for (int rank = 0; rank < world; ++rank) {
    const TrainingStep& step = steps[static_cast<size_t>(rank)];
    const EvaluationStep* eval = evals.empty() ? nullptr : &evals[static_cast<size_t>(rank)];
    std::string text = ir::printGraph(step.graph);
    size_t index = std::find(texts.begin(), texts.end(), text) - texts.begin();
    if (index == texts.size()) {
      texts.push_back(text);
      const std::string stem = world == 1 ? "step" : "rank" + std::to_string(rank);
      GraphFiles g{stem + ".gir", stem + ".plan.json", "", ""};
      const size_t graphFile = files.size();
      files.push_back({g.graph, std::move(text)});
      files.push_back({g.plan, runtime::planToJson(step.plan)});
      if (eval) {
        g.evalGraph = stem + ".eval.gir";
        g.evalPlan = stem + ".eval.plan.json";
        files.push_back({g.evalGraph, ir::printGraph(eval->graph)});
        files.push_back({g.evalPlan, runtime::planToJson(eval->plan.plan)});
      }
      if (runtime::needsGeneratedKernels(step.graph))
        if (int code = addGeneratedKernelFiles(r, step, eval, stem, graphFile, files, g,
                                               rank == 0 ? &referenceSummary : nullptr);
            code != kExitOk)
          return code;
      graphFiles.push_back(std::move(g));
    }
    const GraphFiles& g = graphFiles[index];
    m.ranks.push_back({rank, g.graph, g.plan, g.kernels, g.ptx, g.tag, g.evalGraph, g.evalPlan,
                       eval ? eval->splits : 1, g.referenceGraph, g.referencePlan, g.ptxTag});
  }
  return kExitOk;
}

// The manifest's record of the flags, the plan chosen and its summaries (gradc run prints them).
nlohmann::json flagsRecord(const ArtifactRequest& r, const ir::Graph& forward, const std::vector<TrainingStep>& steps,
                           const std::vector<EvaluationStep>& evals, const std::string& evalUnavailable,
                           const std::string& referenceSummary, const std::optional<BatchChoice>& batch) {
  const int world = r.parallel.devices;
  const TrainingStep& first = steps.front();
  const std::string remat(passes::rematStrategyName(first.report.chosen));
  const passes::PlanConfig& chosen = first.report.config;
  nlohmann::json flags = {{"set", r.sets},
                          {"budget", r.memory.budget},
                          {"remat", r.memory.remat},
                          {"micro_batches", r.memory.microBatches},
                          {"loss_chunks", r.memory.lossChunks},
                          {"batch_multiple", r.memory.batchMultiple},
                          {"fuse", !r.memory.noFuse},
                          {"devices", world},
                          {"loss_placement", r.parallel.lossPlacement},
                          {"bucket_mib", r.parallel.bucketMiB},
                          {"shard", r.parallel.shard},
                          {"optimizer", r.optimizer.optimizer},
                          {"lr", r.optimizer.lr},
                          {"min_lr", r.optimizer.minLr},
                          {"momentum", r.optimizer.momentum},
                          {"weight_decay", r.optimizer.weightDecay},
                          {"clip_norm", r.optimizer.clipNorm},
                          {"warmup_steps", r.optimizer.warmupSteps},
                          {"decay_steps", r.optimizer.decaySteps},
                          {"chosen", {{"remat", remat},
                                      {"micro_batches", chosen.microBatches},
                                      {"loss_chunks", chosen.lossChunks},
                                      {"shard", passes::zeroStageNumber(chosen.zero)}}},
                          {"summary", describeStep(first)}};
  if (!referenceSummary.empty()) flags["reference"] = {{"summary", referenceSummary}};
  if (evals.empty()) {
    flags["evaluation"] = {{"unavailable", evalUnavailable}};
  } else {
    const EvaluationStep& e = evals.front();
    const std::int64_t rows = e.graph.inputs().empty() ? 0 : e.graph.inputs().front()->type().shape.at(0);
    std::string line = fmt::format("evaluation: the forward in evaluation mode, {} row{} per run{}, peak {} "
                                   "(the training state and {} of its own, inside the step's arena)",
                                   rows, rows == 1 ? "" : "s",
                                   e.splits > 1 ? fmt::format(" ({} runs per batch)", e.splits) : std::string(),
                                   passes::formatBytes(e.plan.plan.peakBytes),
                                   passes::formatBytes(e.plan.plan.peakBytes - first.plan.persistentBytes));
    if (first.plan.budgetBytes) line += " of " + passes::formatBytes(*first.plan.budgetBytes) + " budget";
    flags["evaluation"] = {{"splits", e.splits}, {"rows_per_run", rows}, {"peak_bytes", e.plan.plan.peakBytes},
                           {"summary", line}};
  }
  if (world > 1) {
    std::vector<passes::GradientBucket> buckets = passes::gradientBuckets(first.graph);
    std::string communicator(forward.kernelTarget().communicator());
    std::transform(communicator.begin(), communicator.end(), communicator.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::string line = "data parallel: " + std::to_string(world) + " ranks (" + communicator + "), loss placement " +
                       r.parallel.lossPlacement + ", " + std::to_string(buckets.size()) + " gradient bucket" +
                       (buckets.size() == 1 ? "" : "s") + " of";
    for (const passes::GradientBucket& b : buckets) line += " " + passes::formatBytes(b.bytes);
    if (chosen.zero != passes::ZeroStage::Replicated)
      line += ", ZeRO stage " + std::to_string(passes::zeroStageNumber(chosen.zero)) + " (" +
              std::string(passes::zeroStageSummary(chosen.zero)) + ")";
    flags["parallel_summary"] = line;
  }
  if (batch) {
    flags["batch_search"] = batch->toJson();
    flags["batch_summary"] = batch->describe();
  }
  return flags;
}

// What checkpoints record of the run's configuration (as before artifacts existed).
nlohmann::json checkpointConfig(const ArtifactRequest& r, const std::vector<std::string>& sets,
                                const passes::OptimizerOptions& opt, const TrainingStep& first) {
  const std::string remat(passes::rematStrategyName(first.report.chosen));
  const passes::PlanConfig& chosen = first.report.config;
  const int world = r.parallel.devices;
  return {{"spec", r.spec},
          {"set", sets},
          {"optimizer", r.optimizer.optimizer},
          {"lr", r.optimizer.lr},
          {"min_lr", opt.resolvedMinLr()},
          {"weight_decay", opt.resolvedWeightDecay()},
          {"momentum", r.optimizer.momentum},
          {"betas", {opt.beta1, opt.beta2}},
          {"eps", opt.eps},
          {"decay", r.optimizer.decay},
          {"clip_norm", r.optimizer.clipNorm},
          {"warmup_steps", r.optimizer.warmupSteps},
          {"decay_steps", r.optimizer.decaySteps},
          {"budget", r.memory.budget},
          {"remat", remat},
          {"micro_batches", chosen.microBatches},
          {"devices", world},
          {"loss_placement", r.parallel.lossPlacement},
          {"shard", passes::zeroStageNumber(chosen.zero)}};
}

}  // namespace

int buildArtifact(const ArtifactRequest& r, const std::filesystem::path& out) {
  int exitCode = kExitOk;
  const int world = r.parallel.devices;
  const int threads = kernelThreadsFor(world);
  const passes::OptimizerOptions opt = r.optimizer.options();
  // --set batch=auto: chosen for the threads this artifact's plan is made for.
  std::vector<std::string> sets = r.sets;
  std::optional<BatchChoice> batch;
  if (int code = resolveAutoBatch({r.spec, &r.memory, &r.parallel, opt, threads}, sets, batch); code != kExitOk)
    return code;
  if (batch && !r.quiet) std::cerr << batch->describe() << "\n";
  SpecSource source;
  std::optional<ir::Graph> forward = loadSpec(r.spec, sets, exitCode, &source);
  if (!forward) return exitCode;
  forward->setKernelThreads(threads);  // the plan is made for the threads the runtime will run with
  forward->setKernelTarget(kernelTargetOf(r.memory));  // and for its device's kernels
  std::optional<passes::TrainingPlanOptions> planOptions = parseTrainingPlanOptions(r.memory, opt, threads);
  if (!planOptions) return kExitUserError;

  // Every rank's step, decided once (rank 0's search; buildRankSteps). Ranks differ in more than
  // the loss placement (dropout draws each rank's rows of the one-device masks), so each is
  // built; identical graphs share their files.
  std::optional<std::vector<TrainingStep>> built =
      buildRankSteps(*forward, *planOptions, r.parallel, RankSteps::Every, r.passManager, exitCode);
  if (!built) return exitCode;
  std::vector<TrainingStep>& steps = *built;
  if (!communicatorSumsEverything(steps, forward->kernelTarget(), world)) return kExitUserError;
  if (!r.quiet) std::cerr << describeStep(steps.front()) << "\n";
  std::string evalUnavailable;
  const std::vector<EvaluationStep> evals = planEvaluations(*forward, steps, world, evalUnavailable);

  runtime::ArtifactManifest m;
  m.model = ir::getString(forward->attrs(), "model").value_or(forward->name());
  m.specPath = r.spec;
  m.specSha256 = runtime::sha256Hex(source.text);
  m.dims = source.dims;
  m.seed = static_cast<std::uint64_t>(ir::getInt(forward->attrs(), "seed").value_or(0));
  m.kernelThreads = threads;
  m.mesh = ir::DeviceMesh::dataParallel(world).toString();
  std::vector<runtime::ArtifactFile> files;
  std::string referenceSummary;  // of rank 0's reference step, when its graph runs generated kernels
  if (int code = addStepFiles(r, steps, evals, files, m, referenceSummary); code != kExitOk) return code;
  m.flagsJson = flagsRecord(r, *forward, steps, evals, evalUnavailable, referenceSummary, batch).dump();
  m.configJson = checkpointConfig(r, sets, opt, steps.front()).dump();
  if (Status s = runtime::writeArtifact(out, m, files); !s) return reportWriteFailure(s);
  return kExitOk;
}

}  // namespace gradc::tools
