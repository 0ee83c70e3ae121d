// The training loop: runs a compiled training graph (forward, backward and optimizer nodes)
// step after step on data, records metrics, saves and resumes checkpoints.
//
// Data binding. A graph whose inputs include `tokens` and `targets` (i64[batch, seq]) is a
// language model: it trains on a text file (or synthetic tokens) through a Batcher. Any other
// data input gets synthetic values (runtime/train/synthetic_inputs.h). The input `step` (i64[],
// created by the optimizer pass) is fed the 1-based step number.
//
// Data parallelism (TrainerOptions::comm): every rank draws the same global batch and keeps its
// rows, so a run over N ranks sees the data a one-device run of the same global batch sees.
//
// Determinism. Everything a step computes is a function of (parameters, optimizer state,
// step, seed, data position): initialisation is keyed by (seed, name), dropout by
// (seed, step, node), batches by (seed, epoch, index). A checkpoint stores exactly that state,
// so a resumed run repeats the uninterrupted run's losses and weights bit for bit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "ir/memory_plan.h"
#include "ir/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/device/device.h"
#include "runtime/core/tensor_map.h"
#include "runtime/io/data.h"
#include "runtime/kernels/generated_kernels.h"
#include "runtime/train/evaluation.h"
#include "runtime/train/metrics.h"

namespace gradc::runtime {

struct TrainerOptions {
  std::string model;                  // for metrics and messages
  std::int64_t steps = 100;           // the run ends after this step (also when resumed)
  std::uint64_t seed = 0;             // ignored when resuming (the checkpoint's seed is used)
  std::optional<std::filesystem::path> data;  // text file; nullopt: synthetic data
  VocabularyKind vocabulary = VocabularyKind::bytes;
  // --data is a token file (runtime/io/token_file.h) of ids in [0, N); without it, a file with
  // llm.c's header is one too, of the model's vocabulary.
  std::optional<std::int64_t> tokenVocabulary;
  bool randomWindows = false;  // --sampling random (runtime/io/data.h)
  std::optional<std::filesystem::path> saveDir;
  std::int64_t saveEvery = 0;         // 0: save only after the last step (when saveDir is set)
  std::optional<std::filesystem::path> resumeDir;
  // Fine-tuning: the parameters at step 0 from a weights file or checkpoint folder, with a
  // fresh optimizer (runtime/train/init_from.h); not with resumeDir.
  std::optional<std::filesystem::path> initFrom;
  std::string config = "{}";          // JSON object stored in checkpoints (optimizer settings, ...)
  bool progress = true;               // progress bar / log lines on stderr
  bool profile = false;               // time per op kind over the steps after the first, printed at the end
  // With profile: each op kind's kernel time fitted and written here, for the planner's
  // throughput objective (runtime/train/cost_probe.h).
  std::optional<std::filesystem::path> costTableOut;
  bool trace = false;                 // record a trace-event file of the run (runtime/train/trace.h) into TrainResult
  // The memory planner's predicted peak of one step of this graph (passes/memory/memory_plan.h),
  // reported beside the measured peak as peak_bytes_planned; nullopt: not planned.
  std::optional<std::int64_t> plannedPeakBytes;
  // The memory plan to execute (runtime/exec/executor.h: one arena, every buffer at its planned
  // offset); nullopt, or GRADC_NO_ARENA=1 in the environment: reference-counted execution.
  std::optional<ir::MemoryPlan> arenaPlan;
  bool checkArena = false;  // poison and check free arena ranges (GRADC_ARENA_CHECK=1 also)
  // The generated kernels of the graph's fused nodes (the artifact's shared object); required
  // when the graph has fused nodes.
  std::shared_ptr<const GeneratedKernels> kernels;
  // The graph is the artifact's reference step (--no-generated-kernels, or on a GPU): every rank
  // of a run must run the same variant (checked before step 1).
  bool referenceStep = false;
  // Data parallelism: this process is rank comm->rank() of comm->worldSize(), and the graph is
  // that rank's partitioned step (passes/data_parallel.h). Each rank feeds its rows of every
  // batch, checks at the start that all ranks hold identical parameters and optimizer state
  // (a checksum, all-gathered), and reports its peak and communication wait; rank 0 shows
  // progress, writes checkpoints and gets every rank's metrics. nullptr: one device.
  Communicator* comm = nullptr;
  // Where the step runs (runtime/backends/device_select.h); nullptr: the CPU. A device other than the
  // host needs arena execution (a memory plan).
  const Device* device = nullptr;
  // Validation while training (runtime/train/evaluation.h): the artifact's evaluation step, run inside
  // the training step's arena (needs arenaPlan) on a validation file read with the training
  // data's vocabulary (needs token data from `data`). Both set, or neither.
  const EvaluationProgram* evaluation = nullptr;
  std::optional<ValidationOptions> validation;
  // Called after every step (tests, custom logging). Returning false stops the run after
  // that step, as an interruption would (a checkpoint is written if saveDir is set).
  std::function<bool(const StepMetrics&)> onStep;
};

struct TrainResult {
  RunMetrics metrics;
  TensorMap state;  // parameters and optimizer state after the last step (the caller's own)
  bool arena = false;  // ran the memory plan in one arena
  // Arena runs: the most bytes each step's kernel allocated outside the arena.
  std::vector<std::int64_t> outsideArenaBytes;
  // Arena runs: the most bytes each step's kernel took from the heap instead of the arena.
  std::vector<std::int64_t> heapBytes;
  // With TrainerOptions::trace, on rank 0: the trace-event file of every rank (runtime/train/trace.h).
  std::string trace;
  // Non-empty when the run stopped early for a reason the caller must report as an error (the
  // loss diverged); metrics hold the steps that ran.
  std::string failure;
};

Expected<TrainResult> train(const ir::Graph& trainingGraph, const TrainerOptions& options);

// True for parameters that are optimizer state (attribute role = "opt_state").
bool isOptimizerState(const ir::Value& param);

}  // namespace gradc::runtime
