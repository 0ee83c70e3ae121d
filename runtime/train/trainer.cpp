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

// Checks that a restored state holds exactly the graph's parameters, with their types.
Status checkState(const ir::Graph& g, const TensorMap& state, const std::filesystem::path& from) {
  for (const auto& p : g.params()) {
    auto it = state.find(p->name());
    if (it == state.end())
      return Error{"checkpoint " + from.string() + " has no tensor '" + p->name() +
                   "' (was it written for another model or optimizer?)"};
    std::string want = ir::toString(p->type()), got = describeTensor(it->second);
    if (want != got)
      return Error{"checkpoint " + from.string() + ": '" + p->name() + "' is " + got + ", the model needs " + want};
  }
  for (const auto& [name, t] : state)
    if (!g.findNamed(name))
      return Error{"checkpoint " + from.string() + " has '" + name + "', which this model does not have"};
  return {};
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
  std::optional<CollectiveContext> collectives;
  // The evaluation step's own (under ZeRO stage 3 it gathers parameters), so the training
  // step's time blocked on communication stays its own.
  std::optional<CollectiveContext> evalCollectives;
  if (o.comm) {
    collectives.emplace(*o.comm);
    evalCollectives.emplace(*o.comm);
  }

  nlohmann::json config = parseJsonBounded(o.config);
  if (!config.is_object()) config = nlohmann::json::object();
  if (!o.model.empty() && !config.contains("model")) config["model"] = o.model;  // named in the weights file
  std::uint64_t seed = o.seed;
  std::int64_t firstStep = 1;
  DataPosition position;
  std::optional<Vocabulary> restoredVocab;
  std::string resumedShape, resumedFrom;  // the checkpoint's global batch x seq, when it says
  std::vector<std::string> resumeNotes;    // optimizer settings that differ from the checkpoint's
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
  if (o.resumeDir) {
    Expected<CheckpointData> ck = loadCheckpoint(*o.resumeDir);
    if (!ck) return ck.error();
    for (auto* part : {&ck->weights, &ck->optimizer})
      for (auto& [name, t] : *part) result.state.emplace(name, t);
    // A checkpoint holds replicated state; a sharded rank keeps its shard of it.
    if (Status s = shardReplicatedState(g, result.state, ck->loaded_from.string()); !s) return s.error();
    if (Status s = checkState(g, result.state, ck->loaded_from); !s) return s.error();
    seed = ck->seed;
    firstStep = ck->step + 1;
    position = ck->data;
    nlohmann::json saved = parseJsonBounded(ck->config);
    if (saved.is_object() && saved.contains("batch_shape") && saved["batch_shape"].is_string())
      resumedShape = saved["batch_shape"].get<std::string>();
    resumedFrom = ck->loaded_from.string();
    // The optimizer settings are the run's to choose (a lower --lr to continue is common), but
    // one that differs from the checkpoint's is said, as PyTorch's restored param_groups would
    // have kept it.
    if (saved.is_object())
      for (const char* key : {"optimizer", "lr", "min_lr", "weight_decay", "momentum", "betas", "eps", "decay",
                              "clip_norm", "warmup_steps", "decay_steps"})
        if (saved.contains(key) && config.contains(key) && saved[key] != config[key])
          resumeNotes.push_back(std::string(key) + " " + saved[key].dump() + " -> " + config[key].dump());
    // A position means something else under the other sampling (runtime/io/data.h).
    if (saved.is_object() && saved.contains("sampling") && saved["sampling"].is_string() &&
        saved["sampling"] != (o.randomWindows ? "random" : "epoch"))
      return Error{"the checkpoint in " + ck->loaded_from.string() + " was trained with --sampling " +
                   saved["sampling"].get<std::string>() + "; resume it with the same"};
    if (saved.is_object() && saved.contains("vocabulary") && saved["vocabulary"].is_string()) {
      std::string v = saved["vocabulary"];
      if (v.rfind("synthetic:", 0) != 0) {
        Expected<Vocabulary> vocab = Vocabulary::parse(v);
        if (!vocab) return vocab.error().withContext("checkpoint " + ck->loaded_from.string() + ": ");
        restoredVocab = *vocab;
      }
    }
    if (firstStep > o.steps)
      return Error{"the checkpoint in " + ck->loaded_from.string() + " is at step " + std::to_string(ck->step) +
                   "; --steps " + std::to_string(o.steps) + " leaves nothing to do"};
  } else {
    Expected<TensorMap> init = initParameters(g, seed);
    if (!init) return init.error();
    result.state = std::move(*init);
    if (o.initFrom) {
      Expected<InitialWeights> weights = loadInitialWeights(*o.initFrom);
      if (!weights) return weights.error();
      if (Status s = applyInitialWeights(g, result.state, *weights); !s) return s.error();
      // Token ids mean what they meant when the weights were trained.
      if (weights->vocabulary && weights->vocabulary->rfind("synthetic:", 0) != 0) {
        Expected<Vocabulary> vocab = Vocabulary::parse(*weights->vocabulary);
        if (!vocab) return vocab.error().withContext("--init-from " + weights->source + ": ");
        restoredVocab = *vocab;
      }
    }
  }

  std::optional<TokenData> tokenData;
  if (isTokenInput(inputNamed(g, "tokens")) && isTokenInput(inputNamed(g, "targets"))) {
    Expected<TokenData> td = makeTokenData(g, o, seed, restoredVocab, position, config, world);
    if (!td) return td.error();
    // A data position counts batches of one shape: under another it names other windows.
    if (!resumedShape.empty() && config["batch_shape"] != resumedShape)
      return Error{"the checkpoint in " + resumedFrom + " was trained on batches of " + resumedShape +
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
    Expected<ImageData> id = makeImageData(*images, o, seed, position, config, world);
    if (!id) return id.error();
    imageData = std::move(*id);
  }
  const ir::Value* stepInput = inputNamed(g, "step");
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
  if (o.comm) {
    nlohmann::json settings = {{"config", config}, {"steps", o.steps}, {"seed", seed}, {"data", "synthetic"}};
    settings["config"].erase("spec");  // the spec's path may differ between hosts; its graph may not
    // One rank on the reference step (--no-generated-kernels) and another on the generated kernels
    // would round differently.
    settings["reference_step"] = o.referenceStep;
    if (o.data) {  // an error joins the gather too: the ranks then fail together, naming it
      Expected<std::string> fingerprint = dataFingerprint(*o.data);
      settings["data"] = fingerprint ? *fingerprint : "unreadable: " + fingerprint.error().message;
    }
    if (Status s = checkIdenticalRun(settings.dump(), *o.comm); !s) return s.error();
    if (Status s = checkIdenticalState(g, result.state, *o.comm); !s) return s.error();
  }

  const bool show = o.progress && rank == 0;
  Progress progress(firstStep, o.steps);
  if (show && !resumeNotes.empty()) {
    std::string line = "note: resuming " + resumedFrom + " with other optimizer settings than it was trained with:";
    for (const std::string& n : resumeNotes) line += " " + n + ";";
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
  const bool sharded = hasShardedState(g);
  std::int64_t peak = 0;
  for (std::int64_t step = firstStep; step <= o.steps; ++step) {
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
    std::int64_t tokens = 1;  // examples per step without a token data set: the first batched input's
    if (tokenData) {
      tokens = tokenData->tokensPerStep;
    } else {
      for (const auto& in : g.inputs())
        if (in->isBatchedInput() && in->type().rank() > 0) {
          tokens = in->type().shape[0] * world;
          break;
        }
    }
    m.tokensPerS = m.stepTimeS > 0 ? static_cast<double>(tokens) / m.stepTimeS : 0;
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

    bool stop = o.onStep && !o.onStep(m);
    const bool regular = o.saveDir && ((o.saveEvery > 0 && step % o.saveEvery == 0) || step == o.steps || stop);
    // Every rank has the same (all-gathered) validation loss, so all decide alike.
    const bool best = bestDir && m.valLoss && *m.valLoss < bestVal;
    const bool due = regular || best;
    // Sharded state is gathered by every rank into the replicated layout; rank 0 writes.
    std::optional<TensorMap> replicated;
    if (due && o.comm && sharded) {
      Expected<TensorMap> full = replicatedState(g, result.state, *o.comm);
      if (!full) return full.error();
      replicated = std::move(*full);
    }
    // Each rank checks what it holds (its own state, shards and per-rank statistics included,
    // and the gathered state on rank 0); the ranks then decide together, so that all of them
    // stop, or none.
    if (due) {
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
        break;
      }
    }
    if (due && rank == 0) {
      DataPosition pos = tokenData   ? tokenData->batcher.position()
                         : imageData ? imageData->batcher.position()
                                     : DataPosition{0, step};
      const TensorMap& state = replicated ? *replicated : result.state;
      if (regular) {
        if (Status s = save(*o.saveDir, g, state, step, seed, pos, config); !s) return s.error();
        if (show) progress.note("saved checkpoint " + o.saveDir->string() + " at step " + std::to_string(step));
      }
      if (best) {
        nlohmann::json withLoss = config;
        withLoss["val_loss"] = *m.valLoss;
        if (Status s = save(*bestDir, g, state, step, seed, pos, withLoss); !s) return s.error().withContext("--save-best: ");
        if (show)
          progress.note("saved the best checkpoint so far (validation loss " + std::to_string(*m.valLoss) + ") " +
                        bestDir->string() + " at step " + std::to_string(step));
      }
    }
    if (best) bestVal = *m.valLoss;
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
  if (trace) {
    Expected<std::vector<std::string>> all = gatherText(*o.comm, trace->events(), "all_gather of the ranks' traces");
    if (!all) return all.error();
    if (rank == 0) result.trace = traceDocument(*all);
  }
  // Every rank's peak (measured, planned) and communication wait, for rank 0's metrics.
  constexpr int kFields = 5;
  at::Tensor mine = at::empty({kFields}, at::kLong);
  mine[0] = peak;
  mine[1] = o.plannedPeakBytes.value_or(-1);
  mine[2] = static_cast<std::int64_t>(collectives->waitSeconds() * 1e6);
  mine[3] = evalPeak;
  mine[4] = evalPeak >= 0 ? evaluator->plannedPeakBytes() : -1;
  at::Tensor all = at::empty({kFields * world}, at::kLong);
  if (Status s = o.comm->allGather(mine, all, "all_gather of the ranks' metrics at the end"); !s)
    return s.error();
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
  result.metrics.ranks[static_cast<size_t>(rank)].beyondPlan = exec->stepsBeyondPlan(5);
  result.metrics.ranks[static_cast<size_t>(rank)].peakStep = exec->devicePeakStep();
  return result;
}

}  // namespace gradc::runtime
