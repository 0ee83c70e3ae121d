#include "runtime/train/trainer.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/all.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/max.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/scalar_tensor.h>
#include <nlohmann/json.hpp>

#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "runtime/comm/collective_context.h"
#include "runtime/comm/mesh_groups.h"
#include "runtime/train/rank_agreement.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"
#include "runtime/io/checkpoint.h"
#include "runtime/io/image_data.h"
#include "runtime/core/json_text.h"
#include "runtime/io/shard_checkpoint.h"
#include "runtime/train/cost_probe.h"
#include "runtime/train/init.h"
#include "runtime/train/init_from.h"
#include "runtime/train/op_profile.h"
#include "runtime/train/progress.h"
#include "runtime/train/starting_point.h"
#include "runtime/train/synthetic_inputs.h"
#include "runtime/train/trace.h"
#include "runtime/train/training_data.h"

namespace gradc::runtime {

bool isOptimizerState(const ir::Value& param) {
  return ir::getString(param.attrs(), "role").value_or("") == "opt_state";
}

namespace {

// [batch, seq] of i64 or i32 class indices.
bool isTokenInput(const ir::Value* v) {
  return v && (v->type().dtype == ir::DType::i64 || v->type().dtype == ir::DType::i32) && v->type().rank() == 2;
}

// The first state tensor (weights or optimizer state) holding a NaN or an infinity, or "". The
// loss of step s is computed before its update, so a diverging update shows only here; such a
// state is never written over a good checkpoint. Checked in chunks of 1 Mi elements, so the
// test's temporaries stay small.
// Sharded state (a rank's padded slice of a flat bucket) is left out when `g` is given: it is
// checked in the gathered, replicated layout.
std::string firstNonFinite(const TensorMap& state, const ir::Graph* g = nullptr) {
  for (const auto& [name, t] : state) {
    if (!at::isFloatingType(t.scalar_type()) || t.numel() == 0) continue;
    if (const ir::Value* v = g ? g->findNamed(name) : nullptr; v && isShardedState(*v)) continue;
    const at::Tensor flat = t.reshape({-1});
    constexpr std::int64_t kChunk = std::int64_t{1} << 20;
    for (std::int64_t begin = 0; begin < flat.numel(); begin += kChunk)
      if (!flat.slice(0, begin, std::min(flat.numel(), begin + kChunk)).isfinite().all().item<bool>()) return name;
  }
  return {};
}

Status save(const std::filesystem::path& dir, const ir::Graph& g, const TensorMap& state, std::int64_t step,
            std::uint64_t seed, const DataPosition& position, const nlohmann::json& config) {
  CheckpointData ck;
  // A name the graph lacks is sharded state in the replicated layout (runtime/io/shard_checkpoint.h):
  // a parameter under ZeRO stage 3, otherwise optimizer state.
  std::unordered_set<std::string> parameters;
  for (const auto& [name, type] : modelParameters(g)) parameters.insert(name);
  for (const auto& [name, t] : state) {
    const ir::Value* p = g.findNamed(name);
    (parameters.count(name) ? ck.weights : !p || isOptimizerState(*p) ? ck.optimizer : ck.weights).emplace(name, t);
  }
  ck.step = step;
  ck.seed = seed;
  ck.data = position;
  ck.config = config.dump();
  return saveCheckpoint(dir, ck);
}

// Minor page faults of this process so far.
std::int64_t minorFaults() {
  struct rusage usage {};
  return getrusage(RUSAGE_SELF, &usage) == 0 ? static_cast<std::int64_t>(usage.ru_minflt) : 0;
}

// Rows [rank b, (rank + 1) b) of a global batch tensor, in storage of their own.
at::Tensor shardOf(const at::Tensor& global, int world, int rank) {
  if (world == 1) return global;
  const std::int64_t b = global.size(0) / world;
  return global.narrow(0, rank * b, b).clone();
}

// The communicators of the step's mesh and a collective context for the training step and one
// for the evaluation step (under ZeRO stage 3 it gathers parameters), so that the training
// step's time blocked on communication stays its own.
struct RunCommunication {
  std::optional<MeshGroups> groups;
  std::optional<CollectiveContext> step;
  std::optional<CollectiveContext> evaluation;

  Status join(const ir::Graph& g, Communicator& comm) {
    step.emplace(comm);
    evaluation.emplace(comm);
    Expected<ir::DeviceMesh> mesh = ir::meshOf(g);
    if (!mesh) return mesh.error();
    // A graph without a mesh of its own and without collectives runs on the run's communicator.
    if (mesh->ranks() != comm.worldSize() && g.attrs().count("mesh") == 0) return {};
    Expected<MeshGroups> joined = MeshGroups::join(comm, *mesh);
    if (!joined) return joined.error();
    groups.emplace(std::move(*joined));
    groups->addTo(*step);
    groups->addTo(*evaluation);
    return {};
  }
};

// Every rank runs the same configuration, steps, seed, data and step variant, from the same
// state: checked together before step 1, so that ranks never silently diverge.
Status checkRanksAgree(const ir::Graph& g, const TrainerOptions& o, const nlohmann::json& config, std::uint64_t seed,
                       const TensorMap& state) {
  nlohmann::json settings = {{"config", config}, {"steps", o.steps}, {"seed", seed}, {"data", "synthetic"}};
  settings["config"].erase("spec");  // the spec's path may differ between hosts; its graph may not
  // One rank on the reference step (--no-generated-kernels) and another on the generated kernels
  // would round differently.
  settings["reference_step"] = o.referenceStep;
  if (o.data) {  // an error joins the gather too: the ranks then fail together, naming it
    Expected<std::string> fingerprint = dataFingerprint(*o.data);
    settings["data"] = fingerprint ? *fingerprint : "unreadable: " + fingerprint.error().message;
  }
  if (Status s = checkIdenticalRun(settings.dump(), *o.comm); !s) return s;
  return checkIdenticalState(g, state, *o.comm);
}

// One step's inputs: the batch's rows of this rank (token or image data, ids checked as they
// are read), the step number, and synthetic values for every other input.
Expected<TensorMap> stepInputs(const ir::Graph& g, const TrainerOptions& o, TokenData* tokenData, ImageData* imageData,
                               std::int64_t step, std::uint64_t seed, int world, int rank) {
  const ir::Value* stepInput = inputNamed(g, "step");
  TensorMap inputs;
  if (tokenData) {
    Batch b = tokenData->batcher.next();
    // A token file's ids are checked as they are read (a whole-file pass would read it all
    // before step 1): one outside the vocabulary stops the run, naming it.
    if (tokenData->checkIds) {
      const std::int64_t largest = std::max(b.tokens.max().item<std::int64_t>(), b.targets.max().item<std::int64_t>());
      if (largest >= tokenData->batcher.vocabSize())
        return Error{"token file '" + o.data->string() + "' holds token " + std::to_string(largest) +
                     " (in the batch of step " + std::to_string(step) + "), outside its vocabulary of " +
                     std::to_string(tokenData->batcher.vocabSize()) + " (--vocab-size)"};
    }
    // The batcher's i64 indices in the inputs' own integer type.
    inputs.emplace("tokens", shardOf(b.tokens, world, rank).to(tokenData->tokenType));
    inputs.emplace("targets", shardOf(b.targets, world, rank).to(tokenData->targetType));
  }
  if (imageData) {
    ImageBatch b = imageData->batcher.next();
    inputs.emplace("images", shardOf(b.images, world, rank).to(imageData->imageType));
    inputs.emplace("labels", shardOf(b.labels, world, rank).to(imageData->labelType));
  }
  for (const auto& in : g.inputs()) {
    if (inputs.count(in->name())) continue;
    if (in.get() == stepInput) inputs.emplace("step", at::scalar_tensor(step, at::kLong));
    else inputs.emplace(in->name(), syntheticInput(*in, seed, step, world, rank));
  }
  return inputs;
}

// Examples per step without a token data set: the first batched input's rows over all ranks.
std::int64_t examplesPerStep(const ir::Graph& g, int world) {
  for (const auto& in : g.inputs())
    if (in->isBatchedInput() && in->type().rank() > 0) return in->type().shape[0] * world;
  return 1;
}

// The checkpoints a run writes after its steps: --save every --save-every steps and at the end
// (or when the caller stops the run), --save-best on a better validation loss. Every rank checks
// that its state is finite before any is written, and rank 0 writes (sharded state gathered
// into the replicated layout first).
struct RunCheckpoints {
  const ir::Graph& g;
  const TrainerOptions& o;
  const nlohmann::json& config;
  std::uint64_t seed;
  std::optional<std::filesystem::path> bestDir;
  double bestVal;  // the best validation loss so far
  bool sharded;
  int rank;
  Progress* progress;  // rank 0's notes, when shown

  // After step `step`, whose metrics are `m`; `stop`: the caller ends the run here. False when
  // the state is not finite on some rank: result.failure says so and nothing was written.
  Expected<bool> afterStep(std::int64_t step, const StepMetrics& m, bool stop, const DataPosition& position,
                           TrainResult& result) {
    const bool regular = o.saveDir && ((o.saveEvery > 0 && step % o.saveEvery == 0) || step == o.steps || stop);
    // Every rank has the same (all-gathered) validation loss, so all decide alike.
    const bool best = bestDir && m.valLoss && *m.valLoss < bestVal;
    if (!regular && !best) return true;
    // Sharded state is gathered by every rank into the replicated layout; rank 0 writes.
    std::optional<TensorMap> replicated;
    if (o.comm && sharded) {
      Expected<TensorMap> full = replicatedState(g, result.state, *o.comm);
      if (!full) return full.error();
      replicated = std::move(*full);
    }
    // Each rank checks what it holds (its own state, shards and per-rank statistics included,
    // and the gathered state on rank 0); the ranks then decide together, so that all of them
    // stop, or none.
    std::string bad = firstNonFinite(result.state, &g);
    if (bad.empty() && replicated) bad = firstNonFinite(*replicated);
    bool diverged = !bad.empty();
    if (o.comm) {
      Expected<bool> any = onAnyRank(diverged, *o.comm, "all_gather of the finite-state checks before saving");
      if (!any) return any.error();
      diverged = *any;
    }
    if (diverged) {
      result.failure = (bad.empty() ? std::string("another rank's state") : "'" + bad + "'") +
                       " is not finite after step " + std::to_string(step) +
                       " (diverged: try a lower --lr or --clip-norm); the checkpoint was not written";
      return false;
    }
    if (rank == 0) {
      const TensorMap& state = replicated ? *replicated : result.state;
      if (regular) {
        if (Status s = save(*o.saveDir, g, state, step, seed, position, config); !s) return s.error();
        if (progress) progress->note("saved checkpoint " + o.saveDir->string() + " at step " + std::to_string(step));
      }
      if (best) {
        nlohmann::json withLoss = config;
        withLoss["val_loss"] = *m.valLoss;
        if (Status s = save(*bestDir, g, state, step, seed, position, withLoss); !s)
          return s.error().withContext("--save-best: ");
        if (progress)
          progress->note("saved the best checkpoint so far (validation loss " + std::to_string(*m.valLoss) + ") " +
                         bestDir->string() + " at step " + std::to_string(step));
      }
    }
    if (best) bestVal = *m.valLoss;
    return true;
  }
};

// Every rank's peak (measured, planned), communication wait and evaluation peak, gathered for
// rank 0's metrics, and the ranks' traces as one document.
Status gatherRankMetrics(const TrainerOptions& o, const CollectiveContext& collectives, const Evaluator* evaluator,
                         std::int64_t peak, std::int64_t evalPeak, const TraceRecorder* trace, const Executor& exec,
                         TrainResult& result) {
  const int world = o.comm->worldSize();
  const int rank = o.comm->rank();
  if (trace) {
    Expected<std::vector<std::string>> all = gatherText(*o.comm, trace->events(), "all_gather of the ranks' traces");
    if (!all) return all.error();
    if (rank == 0) result.trace = traceDocument(*all);
  }
  constexpr int kFields = 5;
  at::Tensor mine = at::empty({kFields}, at::kLong);
  mine[0] = peak;
  mine[1] = o.plannedPeakBytes.value_or(-1);
  mine[2] = static_cast<std::int64_t>(collectives.waitSeconds() * 1e6);
  mine[3] = evalPeak;
  mine[4] = evalPeak >= 0 ? evaluator->plannedPeakBytes() : -1;
  at::Tensor all = at::empty({kFields * world}, at::kLong);
  if (Status s = o.comm->allGather(mine, all, "all_gather of the ranks' metrics at the end"); !s) return s;
  for (int r = 0; r < world; ++r) {
    const std::int64_t planned = all[kFields * r + 1].item<std::int64_t>();
    result.metrics.ranks.push_back(RankMetrics{r, all[kFields * r].item<std::int64_t>(),
                                               planned < 0 ? std::nullopt : std::optional<std::int64_t>(planned),
                                               static_cast<double>(all[kFields * r + 2].item<std::int64_t>()) / 1e6});
    if (const std::int64_t measured = all[kFields * r + 3].item<std::int64_t>(); measured >= 0) {
      result.metrics.ranks.back().evalPeakBytesMeasured = measured;
      result.metrics.ranks.back().evalPeakBytesPlanned = all[kFields * r + 4].item<std::int64_t>();
    }
  }
  result.metrics.ranks[static_cast<size_t>(rank)].beyondPlan = exec.stepsBeyondPlan(5);
  result.metrics.ranks[static_cast<size_t>(rank)].peakStep = exec.devicePeakStep();
  return {};
}

}  // namespace

Expected<TrainResult> train(const ir::Graph& g, const TrainerOptions& o) {
  MemoryTracker::install();
  const bool arena = o.arenaPlan && !arenaDisabledByEnvironment();
  ExecutorOptions eo;
  eo.checkArena = o.checkArena || arenaCheckRequestedByEnvironment();
  eo.device = o.device;
  const bool onHost = !o.device || o.device->isHost();
  if (!onHost && !arena)
    return Error{"reference-counted execution (GRADC_NO_ARENA=1, or no memory plan) runs on the CPU device only, not on " +
                 o.device->name()};
  Expected<Executor> exec = arena ? Executor::create(g, *o.arenaPlan, eo) : Executor::create(g);
  if (!exec) return exec.error();
  if (needsGeneratedKernels(g) && !o.kernels)
    return Error{"the graph runs generated kernels (fused nodes) but none were loaded for it"};
  if (Status s = exec->setGeneratedKernels(o.kernels); !s) return s.error();
  const int world = o.comm ? o.comm->worldSize() : 1;
  const int rank = o.comm ? o.comm->rank() : 0;
  RunCommunication communication;
  if (o.comm)
    if (Status s = communication.join(g, *o.comm); !s) return s.error();
  std::optional<CollectiveContext>& collectives = communication.step;
  std::optional<CollectiveContext>& evalCollectives = communication.evaluation;

  nlohmann::json config = parseJsonBounded(o.config);
  if (!config.is_object()) config = nlohmann::json::object();
  if (!o.model.empty() && !config.contains("model")) config["model"] = o.model;  // named in the weights file
  TrainResult result;
  result.metrics.model = o.model;
  result.metrics.intraOpThreads = at::get_num_threads();
  result.metrics.blas = blasInfo();

  // The checkpoint folder is this run's from before its first step: a second run saving there
  // fails now, and so does an unwritable location, not after the last step.
  std::optional<CheckpointLock> saveLock;
  if (o.saveDir && rank == 0) {
    Expected<CheckpointLock> lock = CheckpointLock::acquire(*o.saveDir);
    if (!lock) return lock.error();
    saveLock.emplace(std::move(*lock));
  }
  std::optional<CheckpointLock> bestLock;
  const std::optional<std::filesystem::path> bestDir = o.validation ? o.validation->saveBest : std::nullopt;
  if (bestDir && rank == 0) {
    Expected<CheckpointLock> lock = CheckpointLock::acquire(*bestDir);
    if (!lock) return lock.error().withContext("--save-best: ");
    bestLock.emplace(std::move(*lock));
  }
  Expected<StartingPoint> start = startingPoint(g, o, config, result.state);
  if (!start) return start.error();
  const std::uint64_t seed = start->seed;
  const std::int64_t firstStep = start->firstStep;

  std::optional<TokenData> tokenData;
  if (isTokenInput(inputNamed(g, "tokens")) && isTokenInput(inputNamed(g, "targets"))) {
    Expected<TokenData> td = makeTokenData(g, o, seed, start->vocabulary, start->position, config, world);
    if (!td) return td.error();
    // A data position counts batches of one shape: under another it names other windows.
    if (!start->resumedShape.empty() && config["batch_shape"] != start->resumedShape)
      return Error{"the checkpoint in " + start->resumedFrom + " was trained on batches of " + start->resumedShape +
                   " tokens (sequences x length, over all ranks); this run's are " +
                   config["batch_shape"].get<std::string>() + ": resume with the same batch, seq and --devices"};
    tokenData = std::move(*td);
  }
  std::optional<ImageData> imageData;
  if (!tokenData && o.data) {
    const std::optional<ImageInputs> images = imageInputs(g);
    if (!images)
      return Error{"model '" + o.model + "' has neither `tokens`/`targets` inputs (a text file) nor `images`/`labels` "
                   "inputs (a safetensors file of images and labels), so it cannot read --data; train it with "
                   "--synthetic"};
    Expected<ImageData> id = makeImageData(*images, o, seed, start->position, config, world);
    if (!id) return id.error();
    imageData = std::move(*id);
  }
  // Parameters and optimizer state move into their planned buffers once (arena runs).
  if (Status s = exec->adoptState(result.state); !s) return s.error();
  std::optional<Evaluator> evaluator;
  double bestVal = std::numeric_limits<double>::infinity();
  if (o.validation) {
    if (!o.evaluation || !exec->usesArena())
      return Error{"--val-data: validation runs the artifact's evaluation step inside the training step's arena, and "
                   "this run has " + std::string(o.evaluation ? "no arena (GRADC_NO_ARENA)" : "no evaluation step")};
    std::int64_t globalBatch = 0;
    Expected<ValidationBatches> batches = validationBatchesFor(
        g, o.validation->data, tokenData ? tokenData->vocabulary : std::nullopt, world, globalBatch);
    if (!batches) return batches.error();
    Expected<Evaluator> e =
        Evaluator::create(*o.evaluation, *exec, eo, *o.validation, std::move(*batches), globalBatch, world, rank);
    if (!e) return e.error();
    evaluator.emplace(std::move(*e));
    // A resumed run keeps the best so far (the checkpoint of --save-best records its loss).
    if (bestDir && o.resumeDir)
      if (Expected<CheckpointData> best = loadCheckpointState(*bestDir); best) {
        nlohmann::json c = parseJsonBounded(best->config);
        if (c.is_object() && c.contains("val_loss") && c["val_loss"].is_number()) bestVal = c["val_loss"].get<double>();
      }
  }
  std::int64_t evalPeak = -1;
#if defined(__GLIBC__)
  // The initial (or resumed) tensors just moved into the arena: give their pages back.
  if (exec->usesArena()) malloc_trim(0);
#endif
  if (o.comm)
    if (Status s = checkRanksAgree(g, o, config, seed, result.state); !s) return s.error();

  const bool show = o.progress && rank == 0;
  Progress progress(firstStep, o.steps);
  if (show && !start->resumeNotes.empty()) {
    std::string line =
        "note: resuming " + start->resumedFrom + " with other optimizer settings than it was trained with:";
    for (const std::string& n : start->resumeNotes) line += " " + n + ";";
    line.pop_back();
    progress.note(line);
  }
  if (!tokenData) progress.setRateUnit("examples/s");  // the first batched input's rows
  OpProfile profile;
  // The roofline's ceilings, measured before the first step (outside every step's peak).
  std::optional<MachinePeaks> peaks;
  if (o.profile && rank == 0) peaks = measureMachinePeaks();
  bool profiling = false;  // from the second step on: the first pays one-time costs
  std::optional<TraceRecorder> trace;
  if (o.trace) trace.emplace(g, rank);
  if (o.profile || trace)
    exec->setNodeHook([&](const ir::Node& node, std::chrono::nanoseconds elapsed) {
      if (profiling) profile.add(node, elapsed);
      if (trace) trace->node(node, elapsed);
    });
  if (evaluator && trace)
    evaluator->setNodeHook([&](const ir::Node& node, std::chrono::nanoseconds elapsed) { trace->node(node, elapsed); });
  const std::int64_t perStep = tokenData ? tokenData->tokensPerStep : examplesPerStep(g, world);
  RunCheckpoints checkpoints{g, o, config, seed, bestDir, bestVal, hasShardedState(g), rank, show ? &progress : nullptr};
  std::int64_t peak = 0;
  for (std::int64_t step = firstStep; step <= o.steps; ++step) {
    Expected<TensorMap> batch = stepInputs(g, o, tokenData ? &*tokenData : nullptr, imageData ? &*imageData : nullptr,
                                           step, seed, world, rank);
    if (!batch) return batch.error();
    TensorMap& inputs = *batch;

    // Arena runs copy the batch into its planned buffers; the loader's tensors go before the
    // peak is measured, so the step's peak is the plan's, not the plan's plus a staged copy.
    if (exec->usesArena()) {
      if (Status s = exec->stageInputs(inputs); !s) return s.error().withContext("step " + std::to_string(step) + ": ");
      inputs.clear();
    }
    MemoryTracker::resetPeak();
    profiling = o.profile && step > firstStep;
    const std::int64_t faults0 = minorFaults();
    if (trace) trace->beginStep(step);
    auto t0 = std::chrono::steady_clock::now();
    Expected<TensorMap> out =
        exec->run(inputs, result.state, RunContext{seed, step, collectives ? &*collectives : nullptr});
    if (out && !onHost) o.device->synchronize();  // the step's time includes its queued kernels
    auto t1 = std::chrono::steady_clock::now();
    if (trace) trace->endStep();
    if (!out) {
      if (collectives && !collectives->failure().empty()) return Error{collectives->failure()};
      return out.error().withContext("step " + std::to_string(step) + ": ");
    }
    peak = std::max(peak, onHost ? MemoryTracker::peakBytes() : exec->devicePeakBytes());

    StepMetrics m;
    m.step = step;
    m.loss = out->at("loss").item<double>();
    m.stepTimeS = std::chrono::duration<double>(t1 - t0).count();
    m.minorFaults = minorFaults() - faults0;
    if (profiling) profile.addStep(m.stepTimeS);
    m.tokensPerS = m.stepTimeS > 0 ? static_cast<double>(perStep) / m.stepTimeS : 0;
    if (auto it = out->find("lr"); it != out->end()) m.lr = it->second.item<double>();
    if (auto it = out->find("grad_norm"); it != out->end()) m.gradNorm = it->second.item<double>();
    out->clear();  // views of the arena, which the evaluation step reuses
    if (evaluator && std::isfinite(m.loss) &&
        ((o.validation->every > 0 && step % o.validation->every == 0) || step == o.steps)) {
      if (trace) trace->beginEvaluation();
      Expected<Evaluation> ev = evaluator->evaluate(
          result.state, RunContext{seed, step, evalCollectives ? &*evalCollectives : nullptr}, o.comm);
      if (!ev) {
        if (trace) trace->endEvaluation(std::nan(""));
        if (evalCollectives && !evalCollectives->failure().empty()) return Error{evalCollectives->failure()};
        return ev.error().withContext("after step " + std::to_string(step) + ": ");
      }
      if (trace) trace->endEvaluation(ev->loss);
      m.valLoss = ev->loss;
      evalPeak = std::max(evalPeak, ev->peakBytes);
    }
    result.metrics.steps.push_back(m);
    if (show) progress.update(m);
    if (!std::isfinite(m.loss)) {
      // Every rank sees the same (all-reduced) loss, so all stop here, and the run still ends
      // as one: metrics of the steps so far, no checkpoint of the diverged state.
      result.failure = "the loss is " + std::to_string(m.loss) + " at step " + std::to_string(step) +
                       " (diverged: try a lower --lr or --clip-norm)";
      break;
    }

    const bool stop = o.onStep && !o.onStep(m);
    const DataPosition position = tokenData   ? tokenData->batcher.position()
                                  : imageData ? imageData->batcher.position()
                                              : DataPosition{0, step};
    Expected<bool> kept = checkpoints.afterStep(step, m, stop, position, result);
    if (!kept) return kept.error();
    if (!*kept) break;
    if (stop) break;
  }
  if (show) progress.finish();
  result.arena = exec->usesArena();
  result.outsideArenaBytes = exec->outsideArenaBytes();
  result.heapBytes = exec->heapBytes();
  // The state leaves with the caller, holding its part of the arena (copied to the host when the
  // arena is on another device): no copy that would raise the run's resident memory at its end.
  exec->releaseState(result.state);
  if (o.profile && rank == 0) std::fputs(profile.format(20, peaks ? &*peaks : nullptr).c_str(), stderr);
  if (o.profile && o.costTableOut && rank == 0 && peaks)
    if (Status s = writeCostTable(*o.costTableOut, profile, *peaks, "profile of " + o.model); !s) return s.error();
  if (!o.comm) {
    result.metrics.ranks.push_back(
        RankMetrics{0, peak, o.plannedPeakBytes, std::nullopt, exec->stepsBeyondPlan(5), exec->devicePeakStep()});
    if (evalPeak >= 0) {
      result.metrics.ranks.back().evalPeakBytesMeasured = evalPeak;
      result.metrics.ranks.back().evalPeakBytesPlanned = evaluator->plannedPeakBytes();
    }
    if (trace) result.trace = traceDocument({trace->events()});
    return result;
  }
  if (Status s = gatherRankMetrics(o, *collectives, evaluator ? &*evaluator : nullptr, peak, evalPeak,
                                   trace ? &*trace : nullptr, *exec, result);
      !s)
    return s.error();
  return result;
}

}  // namespace gradc::runtime
