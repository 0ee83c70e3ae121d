// gradc compile SPEC [--set k=v | --set batch=auto]... [--emit ir|dot|summary|plan|llvm|ptx] [-o FILE] [--budget B] [--remat S]
//   [--micro-batches K|auto] [--loss-chunks K|auto|off] [--devices N] [--loss-placement local|gather] [--bucket-mib M]
//
// ir and dot describe the forward graph (with --devices N, rank 0's); summary describes it and adds every recompute
// strategy's peak and overhead for the training step; plan compiles the training step (with
// --budget, --remat, --micro-batches; AdamW defaults) and writes its memory plan as JSON
// (runtime/exec/plan_json.h, docs/memory.md); with --devices, of one data-parallel rank, with every
// rank's peak (docs/parallel.md).
#include <future>
#include <iostream>
#include <memory>

#include <fmt/format.h>

#include "codegen/kernels.h"
#include "ir/op_table.h"
#include "passes/budget.h"
#include "passes/dce.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_loss.h"
#include "passes/graph_stats.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/plan/training_planner.h"
#include "passes/schedule.h"
#include "passes/shard_state.h"
#include "runtime/exec/plan_json.h"
#include "tools/artifact_build.h"
#include "tools/batch_choice.h"
#include "tools/commands.h"
#include "tools/compiler_heap.h"
#include "tools/output.h"
#include "tools/pipeline_options.h"
#include "tools/spec_loading.h"
#include "tools/summary_report.h"
#include "tools/training_step.h"

namespace gradc::tools {

namespace {
struct CompileOptions {
  std::string spec;
  std::vector<std::string> sets;
  PipelineOptions pipeline;
  MemoryFlags memory;
  ParallelFlags parallel;
  OptimizerFlags optimizer;
  CLI::Option* emitOption = nullptr;
};

// The training step's plan: the pipeline `gradc train` runs, with the default optimizer (AdamW)
// and the memory flags.
// With --devices N, the plan is rank 0's, and `ranks` has every rank's peak and its largest
// buffers at the peak (ranks other than 0 share one graph, so one is compiled for all).
int emitPlan(const ir::Graph& forward, const CompileOptions& o) {
  int exitCode = kExitOk;
  std::optional<passes::TrainingPlanOptions> planOptions = parseTrainingPlanOptions(o.memory, o.optimizer.options(), kernelThreadsFor(o.parallel.devices));
  if (!planOptions) return kExitUserError;
  // Rank 0, then (when it differs) the other ranks' step: one for all of them, or under ZeRO
  // every rank's (each owns other shards, whose longest segments set its update's workspace).
  std::optional<std::vector<TrainingStep>> built = buildRankSteps(
      forward, *planOptions, o.parallel, RankSteps::Distinct, o.pipeline.passManagerOptions(), exitCode);
  if (!built) return exitCode;
  std::vector<TrainingStep>& steps = *built;
  if (o.parallel.devices > 1) {
    std::vector<passes::RankPlan> ranks;
    for (int rank = 0; rank < o.parallel.devices; ++rank) {
      const size_t index = steps.size() == static_cast<size_t>(o.parallel.devices) ? static_cast<size_t>(rank)
                           : rank == 0                                          ? 0
                                                                                : steps.size() - 1;
      const passes::MemoryPlan& plan = steps[index].plan;
      passes::RankPlan r{rank, plan.peakBytes, plan.arenaBytes, {}};
      std::vector<size_t> live = plan.liveAt(plan.peakStep);
      for (size_t k = 0; k < live.size() && k < 8; ++k) {
        const passes::PlannedBuffer& b = plan.buffers[live[k]];
        r.largestAtPeak.push_back({b.name, b.kind, b.type, b.size});
      }
      ranks.push_back(std::move(r));
    }
    steps.front().plan.ranks = std::move(ranks);
  }
  std::optional<TrainingStep> step = std::move(steps.front());
  if (Status s = writeOutput(o.pipeline.output, runtime::planToJson(step->plan)); !s)
    return reportWriteFailure(s);
  keepUntilExit(std::move(steps));
  keepUntilExit(std::move(step));
  return kExitOk;
}

// --emit llvm / --emit ptx: the generated kernels of the training step's fused regions (rank 0's
// step under --devices N), each after a comment naming its ops and their spec layers.
int emitKernels(const ir::Graph& forward, const CompileOptions& o) {
  int exitCode = kExitOk;
  std::optional<passes::TrainingPlanOptions> planOptions = parseTrainingPlanOptions(o.memory, o.optimizer.options(), kernelThreadsFor(o.parallel.devices));
  if (!planOptions) return kExitUserError;
  Expected<passes::DataParallelOptions> parallel = o.parallel.forRank(0);
  if (!parallel) {
    std::cerr << "gradc: error: " << parallel.error().message << "\n";
    return kExitUserError;
  }
  std::optional<TrainingStep> step = buildTrainingStep(forward, *planOptions, exitCode, *parallel,
                                                       o.pipeline.passManagerOptions());
  if (!step) return exitCode;
  Expected<std::string> text = o.pipeline.emit == "ptx" ? codegen::emitPtx(step->graph) : codegen::emitCpuLlvm(step->graph);
  if (!text) {
    std::cerr << "gradc: error: " << text.error().message << "\n";
    return kExitInternal;
  }
  if (Status s = writeOutput(o.pipeline.output, *text); !s)
    return reportWriteFailure(s);
  return kExitOk;
}

// Rank 0's forward graph under --devices N (its shard, loss placement, collectives), or nullopt
// after printing the error.
std::optional<ir::Graph> rankZeroForward(const ir::Graph& forward, const CompileOptions& o) {
  Expected<passes::DataParallelOptions> parallel = o.parallel.forRank(0);
  Expected<ir::Graph> local = parallel ? passes::partitionForward(forward, *parallel) : Expected<ir::Graph>(parallel.error());
  if (!local) {
    std::cerr << "gradc: error: --devices " << o.parallel.devices << ": " << local.error().message << "\n";
    return std::nullopt;
  }
  return std::move(*local);
}

// What fusing the LM head into the loss saves (passes/fuse_loss.h): the step without recompute
// at each chunk count auto may pick, against the unfused step's peak.
std::optional<std::string> lossChunkTable(const ir::Graph& forward, passes::TrainingPlanOptions options,
                                          std::int64_t unfusedPeak) {
  options.lossChunks = passes::LossChunking{passes::LossChunking::Mode::Fixed, 1};
  Expected<passes::TrainingPlan> fused = passes::chooseTrainingPlan(forward, options);
  if (!fused) {
    std::cerr << "gradc: error: " << fused.error().message << "\n";
    return std::nullopt;
  }
  std::string out =
      "\nfused LM-head loss (--loss-chunks K: linear + cross_entropy and their gradients as one op over K chunks of "
      "tokens, never holding all the logits), no recompute:\n";
  out += "chunks   rows per chunk   predicted peak   saved\n";
  out += fmt::format("{:<8} {:<16} {:<16} {}\n", "off", "-", passes::formatBytes(unfusedPeak), "0 B");
  std::int64_t rows = 0;
  for (const auto& n : fused->graph.nodes())
    if (n->op().role == ir::OpRole::FusedLinearLoss) rows = n->operand(2)->type().numel();
  for (int k : passes::lossChunkCandidates(fused->graph)) {
    passes::setLossChunks(fused->graph, k);
    const std::int64_t peak = passes::scheduledPeakBytes(fused->graph);
    out += fmt::format("{:<8} {:<16} {:<16} {}\n", k, ir::linearCrossEntropyChunkRows(rows, k), passes::formatBytes(peak),
                       passes::formatBytes(unfusedPeak - peak));
  }
  return out;
}

// What each ZeRO stage (passes/shard_state.h) does to one rank's step without recompute: its
// peak, the parameters and optimizer state it keeps, the reduced gradients it holds for the
// update, and the bytes it sends per step.
std::optional<std::string> shardTable(const ir::Graph& forward, passes::TrainingPlanOptions options, int world) {
  std::string out = fmt::format(
      "\nZeRO sharding over the {} ranks (--shard S), per rank, no recompute; sent = bytes each rank sends per step "
      "(ring collectives):\n", world);
  out += fmt::format("{:<6} {:<16} {:<14} {:<16} {:<18} {}\n", "stage", "predicted peak", "parameters",
                     "optimizer state", "reduced gradients", "sent per step");
  options.remat = passes::RematStrategy::None;
  options.plan.budgetBytes.reset();
  for (passes::ZeroStage stage : {passes::ZeroStage::Replicated, passes::ZeroStage::OptimizerState,
                                  passes::ZeroStage::Gradients, passes::ZeroStage::Parameters}) {
    options.dataParallel->shard = stage;
    Expected<passes::TrainingPlan> step = passes::chooseTrainingPlan(forward, options);
    if (!step) {
      std::cerr << "gradc: error: --shard " << passes::zeroStageNumber(stage) << ": " << step.error().message << "\n";
      return std::nullopt;
    }
    std::int64_t params = 0, state = 0, grads = 0;
    for (const auto& p : step->graph.params()) (ir::isLearned(*p) ? params : state) += p->type().bytes();
    for (const auto& n : step->graph.nodes()) {
      const std::int64_t bucket = ir::getInt(n->attrs(), "bucket").value_or(-1);
      if (bucket < 0) continue;
      if (n->op().collective == ir::Collective::AllReduceStart) grads += n->result(0)->type().bytes();
      if (n->op().collective == ir::Collective::ReduceScatterWait) grads += n->result(0)->type().bytes();
    }
    const passes::CommunicationVolume sent = passes::communicationVolume(step->graph);
    out += fmt::format("{:<6} {:<16} {:<14} {:<16} {:<18} {}\n", passes::zeroStageNumber(stage), passes::formatBytes(step->report.predictedPeakBytes),
                       passes::formatBytes(params), passes::formatBytes(state), passes::formatBytes(grads),
                       passes::formatBytes(sent.total()));
  }
  return out;
}

// The forward graph's summary, then every recompute strategy's predicted peak and overhead on
// the training step (AdamW), under --budget when given. The step takes the forward graph over
// when nothing after it reads the forward (a large spec's summary then holds one graph, not two).
int emitSummary(ir::Graph& fullForward, const CompileOptions& o, const std::optional<BatchChoice>& batch) {
  // With --devices N: rank 0's graph, so sizes and strategies are per device.
  std::optional<ir::Graph> partitioned;
  passes::TrainingPlanOptions options;
  options.fuseElementwise = !o.memory.noFuse;  // the step gradc train would run
  if (o.parallel.devices > 1) {
    partitioned = rankZeroForward(fullForward, o);
    if (!partitioned) return kExitUserError;
    options.dataParallel = *o.parallel.forRank(0);
  }
  ir::Graph& forward = partitioned ? *partitioned : fullForward;
  std::string text = batch ? batch->describe() + "\n\n" : std::string();
  text += formatSummary(forward, passes::computeGraphStats(forward));
  const int attentionCores = options.fuseElementwise ? passes::countFusableAttention(forward) : 0;
  if (partitioned)
    text += "\n(rank 0 of " + std::to_string(o.parallel.devices) + " data-parallel ranks, loss placement " +
            o.parallel.lossPlacement + ": per-device sizes)\n";
  options.remat = passes::RematStrategy::None;
  std::optional<std::int64_t> budget;
  if (!o.memory.budget.empty()) {
    Expected<std::int64_t> bytes = passes::parseBytes(o.memory.budget);
    if (!bytes) {
      std::cerr << "gradc: error: --budget: " << bytes.error().message << "\n";
      return kExitUserError;
    }
    budget = *bytes;
  }
  const std::optional<std::int64_t> reserve = parseDeviceReserve(o.memory);
  if (!reserve) return kExitUserError;
  if (budget && *budget - *reserve <= 0) {
    std::cerr << "gradc: error: a budget of " << passes::formatBytes(*budget) << " leaves nothing for the step beside the "
              << passes::formatBytes(*reserve) << " reserved for the device's libraries\n";
    return kExitUserError;
  }
  const bool fusable = passes::countFusableLosses(forward) > 0;
  const bool forwardReadAfter = fusable || (partitioned && options.optimizer);
  Expected<ir::Graph> step = forwardReadAfter ? passes::trainingStepAsIs(forward, options)
                                              : passes::trainingStepAsIs(std::move(forward), options);
  if (!step) {
    std::cerr << "gradc: error: " << step.error().message << "\n";
    return kExitUserError;
  }
  // The step is verified while the strategies are measured on it (both only read it).
  std::future<Status> verified = std::async(std::launch::async, [&] { return passes::verifyTrainingStep(*step); });
  Expected<std::vector<passes::StrategySummary>> rows =
      passes::summarizeStrategies(*step, budget ? std::optional<std::int64_t>(*budget - *reserve) : std::nullopt);
  if (Status s = verified.get(); !s) {
    std::cerr << "gradc: error: internal: " << s.message() << "\n";
    return kExitInternal;
  }
  if (!rows) {
    std::cerr << "gradc: error: " << rows.error().message << "\n";
    return kExitUserError;
  }
  std::string fusion = "--no-fuse";
  if (options.fuseElementwise) {
    fusion = "elementwise regions fused";
    if (attentionCores > 0)
      fusion += fmt::format(", {} attention core{} as tiled attention ops (no [S, S_kv] buffers)", attentionCores,
                            attentionCores == 1 ? "" : "s");
  }
  text += std::string("\nrecompute strategies for one training step (AdamW, whole step: parameters, gradients, "
                      "optimizer state, activations, workspaces; ") +
          fusion + ")";
  text += budget ? " under a budget of " + passes::formatBytes(*budget) +
                       (*reserve > 0 ? " less " + passes::formatBytes(*reserve) + " for the device's libraries" : "") +
                       ":\n"
                 : ":\n";
  text += passes::formatStrategySummaries(*rows);
  if (fusable) {
    std::optional<std::string> table = lossChunkTable(forward, options, passes::scheduledPeakBytes(*step));
    if (!table) return kExitUserError;
    text += *table;
  }
  if (partitioned && options.optimizer) {
    std::optional<std::string> table = shardTable(forward, options, o.parallel.devices);
    if (!table) return kExitUserError;
    text += *table;
  }
  if (Status s = writeOutput(o.pipeline.output, text); !s)
    return reportWriteFailure(s);
  keepUntilExit(std::move(*step));
  keepUntilExit(std::move(partitioned));
  return kExitOk;
}

int runCompile(CompileOptions o) {
  // -o DIR without --emit, or --emit artifact: the compiled artifact (runtime/io/artifact.h).
  const bool artifact = o.pipeline.emit == "artifact" || (o.emitOption->count() == 0 && o.pipeline.output != "-");
  if (artifact) {
    if (o.pipeline.output == "-") {
      std::cerr << "gradc: error: --emit artifact writes a folder: give it with -o DIR\n";
      return kExitUserError;
    }
    ArtifactRequest request{o.spec, o.sets, o.optimizer, o.memory, o.parallel, /*quiet=*/false,
                            o.pipeline.passManagerOptions(), /*withPtx=*/true};
    return buildArtifact(request, o.pipeline.output);
  }
  tuneHeapForCompiling();
  // --set batch=auto: the batch is chosen first, then the spec compiled at it (plans made for
  // one thread, as every --emit here).
  std::vector<std::string> sets = o.sets;
  std::optional<BatchChoice> batch;
  if (int code = resolveAutoBatch({o.spec, &o.memory, &o.parallel, o.optimizer.options(), 0}, sets, batch);
      code != kExitOk)
    return code;
  if (batch && o.pipeline.emit != "summary") std::cerr << batch->describe() << "\n";
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, sets, exitCode);
  if (!graph) return exitCode;
  graph->setKernelTarget(kernelTargetOf(o.memory));
  struct KeepForward {  // the spec's graph, however the command ends
    std::optional<ir::Graph>& graph;
    ~KeepForward() { keepUntilExit(std::move(graph)); }
  } keepForward{graph};
  if (o.pipeline.emit == "plan") return emitPlan(*graph, o);
  if (o.pipeline.emit == "llvm" || o.pipeline.emit == "ptx") return emitKernels(*graph, o);

  // ir and dot show the forward graph as the spec defines it.
  passes::PassManager pm(o.pipeline.passManagerOptions());
  pm.add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(*graph);
  if (!ran) {
    std::cerr << "gradc: error: " << ran.error().message << "\n";
    return kExitInternal;
  }
  if (o.pipeline.emit == "summary") return emitSummary(*graph, o, batch);
  if (o.parallel.devices > 1) {
    std::optional<ir::Graph> local = rankZeroForward(*graph, o);
    return local ? emitGraph(*local, o.pipeline) : kExitUserError;
  }
  return emitGraph(*graph, o.pipeline);
}
}  // namespace

Runner addCompileCommand(CLI::App& cmd) {
  auto o = std::make_shared<CompileOptions>();
  cmd.add_option("spec", o->spec, "The YAML model spec (e.g. models/gpt-mini.yaml)")->required();
  cmd.add_option("--set", o->sets, "Override a dim (or seed): --set batch=64 (repeatable; the value may be an expression)");
  o->pipeline.addTo(cmd, "summary");
  o->memory.addTo(cmd);
  o->parallel.addTo(cmd);
  o->optimizer.addTo(cmd);
  cmd.add_option("--device", o->memory.device,
                 "The device kind the plan is made for: its kernels' workspaces, what its ranks' communicator can "
                 "sum, and its libraries' reserve (--device-reserve) unless given")
      ->check(CLI::IsMember(deviceNames()))
      ->capture_default_str();
  // compile alone also emits the training step's memory plan: widen the shared --emit check.
  CLI::Option* emit = cmd.get_option("--emit");
  emit->get_validator()->active(false).description("");
  emit->check(CLI::IsMember({"ir", "dot", "summary", "plan", "llvm", "ptx", "artifact"}));
  emit->description("What to write: ir (IR text), dot (Graphviz), summary (sizes and FLOPs) of the forward graph, "
                    "plan (the training step's memory plan as JSON, for gradc inspect), llvm or ptx (the generated "
                    "kernels of the step's fused elementwise regions: LLVM IR for this CPU, PTX for sm_70 and newer GPUs), or "
                    "artifact (a folder gradc train and gradc-run execute; the default with -o and no --emit)");
  o->emitOption = emit;
  return [o] { return runCompile(*o); };
}

}  // namespace gradc::tools
