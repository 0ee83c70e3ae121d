// Validation while training (`gradc train --val-data FILE --eval-every N --eval-batches K`):
// the artifact's evaluation step (tools/evaluation_step.h) run over a validation file between
// two training steps, inside the training step's arena (passes/evaluation_plan.h).
//
// Batches. A text or token file is read with the training data's vocabulary and cut into
// non-overlapping windows of the model's sequence length, in file order, as `gradc eval` cuts
// it; a safetensors file of images and labels is read in file order, as `gradc eval` reads it.
// K > 0 takes the full batches at K evenly spaced positions (batch i * n / K of n), the same K
// at every evaluation, so that curves are comparable; K = 0 takes every full batch (a short
// last batch is left out, as by `gradc eval`). The validation loss is the mean of the batches' mean losses.
//
// Ranks. Each rank evaluates its rows of every batch (rows [r b, (r+1) b) of the global batch,
// as in training), in `splits` runs of b / splits rows; the ranks' sums are all-gathered, so
// every rank reports the same loss. The evaluation step has no collectives of its own.
//
// Memory. The executor shares the training executor's arena; the parameters are read where
// the training step keeps them. The measured peak of an evaluation is the most the tracked
// allocator (or the device) held during it, to be compared with the evaluation plan's peak.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "ir/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/exec/executor.h"
#include "runtime/core/tensor_map.h"
#include "runtime/io/artifact.h"
#include "runtime/io/data.h"
#include "runtime/io/image_data.h"

namespace gradc::runtime {

struct ValidationOptions {
  std::filesystem::path data;
  std::int64_t every = 0;    // after every N steps and after the last; 0: after the last only
  std::int64_t batches = 0;  // K evenly spaced full batches; 0: all of them
  std::optional<std::filesystem::path> saveBest;  // the checkpoint of the lowest validation loss
};

struct Evaluation {
  double loss = 0;
  std::int64_t peakBytes = 0;  // measured on this rank
};

// A validation file as full global batches of the step's two data inputs: `tokens`/`targets`
// (text or a token file) or `images`/`labels` (a safetensors file of images and labels).
struct ValidationBatches {
  std::string first, second;  // the inputs' names
  std::int64_t count = 0;     // full batches
  // Full batch `index` (< count): [globalBatch, ...] tensors of both inputs; an Error for data
  // the model cannot take (a token outside the vocabulary).
  std::function<Expected<std::pair<at::Tensor, at::Tensor>>(std::int64_t index)> batch;
};

// The windows of a text or token file, read with the training data's vocabulary.
Expected<ValidationBatches> textValidationBatches(const std::filesystem::path& path, const Vocabulary& vocabulary,
                                                  std::int64_t globalBatch, std::int64_t seq);
// The images of a safetensors file of `images` and `labels`, in file order.
Expected<ValidationBatches> imageValidationBatches(const std::filesystem::path& path, const ImageInputs& inputs,
                                                   std::int64_t globalBatch);

// The validation batches for the training step `g` of one of `world` ranks: a text or token file
// read with `vocabulary` for `tokens`/`targets` inputs (nullopt: the run trains on synthetic
// data, refused), a file of images and labels for `images`/`labels`; `globalBatch` is set to the
// rows of a batch over all ranks.
Expected<ValidationBatches> validationBatchesFor(const ir::Graph& g, const std::filesystem::path& path,
                                                 const std::optional<Vocabulary>& vocabulary, int world,
                                                 std::int64_t& globalBatch);

class Evaluator {
 public:
  // `host` is the training executor whose arena the evaluation step shares; `globalBatch` the
  // training step's global batch (rows of every input over all ranks).
  static Expected<Evaluator> create(const EvaluationProgram& program, const Executor& host,
                                    const ExecutorOptions& options, const ValidationOptions& validation,
                                    ValidationBatches data, std::int64_t globalBatch, int world, int rank);

  // One evaluation of the parameters in `state` (the training executor's arena tensors).
  // With `comm`, every rank must call it at the same step.
  Expected<Evaluation> evaluate(TensorMap& state, const RunContext& context, Communicator* comm);

  std::int64_t batches() const { return static_cast<std::int64_t>(chosen_.size()); }
  std::int64_t plannedPeakBytes() const { return plannedPeak_; }
  void setNodeHook(Executor::NodeHook hook) { exec_.setNodeHook(std::move(hook)); }

 private:
  Evaluator(Executor exec, ValidationBatches data, std::vector<std::int64_t> chosen, std::int64_t globalBatch,
            int splits, int world, int rank, at::ScalarType firstType, at::ScalarType secondType,
            std::int64_t plannedPeak)
      : exec_(std::move(exec)), data_(std::move(data)), chosen_(std::move(chosen)), globalBatch_(globalBatch),
        splits_(splits), world_(world), rank_(rank), firstType_(firstType), secondType_(secondType),
        plannedPeak_(plannedPeak) {}

  Executor exec_;
  ValidationBatches data_;
  std::vector<std::int64_t> chosen_;  // full batch indices, ascending
  std::int64_t globalBatch_;
  int splits_, world_, rank_;
  at::ScalarType firstType_, secondType_;
  std::int64_t plannedPeak_;
};

}  // namespace gradc::runtime
