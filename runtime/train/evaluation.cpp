#include "runtime/train/evaluation.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <memory>

#include "runtime/core/dtype_map.h"
#include "runtime/exec/memory_tracker.h"
#include "runtime/train/training_data.h"

namespace gradc::runtime {

Expected<ValidationBatches> textValidationBatches(const std::filesystem::path& path, const Vocabulary& vocabulary,
                                                  std::int64_t globalBatch, std::int64_t seq) {
  Expected<TextDataset> data = TextDataset::fromFile(path, vocabulary);
  if (!data) {
    const bool symbol = data.error().message.find("not in the vocabulary") != std::string::npos;
    return Error{"--val-data: " + data.error().message +
                 (symbol ? " (validation reads with the training data's vocabulary: with --vocab chars, the symbols "
                           "of --data; --vocab bytes reads every file)"
                         : "")};
  }
  const bool checkIds = data->isTokenFile();
  Expected<EvalBatches> windows = EvalBatches::create(std::move(*data), globalBatch, seq);
  if (!windows) return windows.error().withContext("--val-data: ");
  if (windows->fullBatches() == 0)
    return Error{"--val-data '" + path.string() + "' has " + std::to_string(windows->windowCount()) + " windows of " +
                 std::to_string(seq) + " tokens, fewer than one batch of " + std::to_string(globalBatch)};
  auto shared = std::make_shared<EvalBatches>(std::move(*windows));
  ValidationBatches out{"tokens", "targets", shared->fullBatches(), nullptr};
  out.batch = [shared, checkIds, vocab = vocabulary.size(),
               path](std::int64_t index) -> Expected<std::pair<at::Tensor, at::Tensor>> {
    shared->seekBatch(index);
    std::optional<Batch> b = shared->next();
    if (!b) return Error{"--val-data: batch " + std::to_string(index) + " is missing"};
    if (checkIds) {  // a token file's ids are checked as they are read, as in training
      const std::int64_t largest = std::max(b->tokens.max().item<std::int64_t>(), b->targets.max().item<std::int64_t>());
      if (largest >= vocab)
        return Error{"--val-data '" + path.string() + "' holds token " + std::to_string(largest) +
                     ", outside the vocabulary of " + std::to_string(vocab)};
    }
    return std::pair{b->tokens, b->targets};
  };
  return out;
}

Expected<ValidationBatches> imageValidationBatches(const std::filesystem::path& path, const ImageInputs& inputs,
                                                   std::int64_t globalBatch) {
  Expected<ImageDataset> data = loadImagesFor(path, inputs);
  if (!data) return data.error().withContext("--val-data: ");
  if (data->size() < globalBatch)
    return Error{"--val-data '" + path.string() + "' has " + std::to_string(data->size()) +
                 " images, fewer than one batch of " + std::to_string(globalBatch)};
  auto shared = std::make_shared<ImageDataset>(std::move(*data));
  ValidationBatches out{"images", "labels", shared->size() / globalBatch, nullptr};
  out.batch = [shared, globalBatch](std::int64_t index) -> Expected<std::pair<at::Tensor, at::Tensor>> {
    ImageBatch b = imageRange(*shared, index * globalBatch, globalBatch);
    return std::pair{b.images, b.labels};
  };
  return out;
}

Expected<ValidationBatches> validationBatchesFor(const ir::Graph& g, const std::filesystem::path& path,
                                                 const std::optional<Vocabulary>& vocabulary, int world,
                                                 std::int64_t& globalBatch) {
  const ir::Value* tokens = inputNamed(g, "tokens");
  if (tokens && inputNamed(g, "targets") && tokens->type().rank() == 2) {
    if (!vocabulary)
      return Error{"--val-data: validation reads a file like --data (text or tokens for `tokens`/`targets`); this run "
                   "trains on synthetic data"};
    globalBatch = tokens->type().shape[0] * world;
    return textValidationBatches(path, *vocabulary, globalBatch, tokens->type().shape[1]);
  }
  if (const std::optional<ImageInputs> images = imageInputs(g)) {
    globalBatch = images->images->type().shape[0] * world;
    return imageValidationBatches(path, *images, globalBatch);
  }
  return Error{"--val-data: validation reads text or tokens into `tokens`/`targets` inputs, or images and labels into "
               "`images`/`labels`; this model has neither"};
}

Expected<Evaluator> Evaluator::create(const EvaluationProgram& program, const Executor& host,
                                      const ExecutorOptions& options, const ValidationOptions& validation,
                                      ValidationBatches data, std::int64_t globalBatch, int world, int rank) {
  const ir::Value* first = inputNamed(program.graph, data.first);
  const ir::Value* second = inputNamed(program.graph, data.second);
  const std::int64_t rows = globalBatch / world;
  if (!first || !second || first->type().rank() == 0 || second->type().rank() == 0 ||
      first->type().shape[0] * program.splits != rows || second->type().shape[0] * program.splits != rows ||
      program.graph.inputs().size() != 2 || !program.graph.findOutput("loss"))
    return Error{"the artifact's evaluation step does not evaluate " + std::to_string(rows / std::max(program.splits, 1)) +
                 " rows of `" + data.first + "` and `" + data.second + "` to a loss, as this training step's batches "
                 "need: was it edited?"};
  ExecutorOptions eo = options;
  eo.arenaOf = &host;
  Expected<Executor> exec = Executor::create(program.graph, program.plan, eo);
  if (!exec) return exec.error().withContext("the evaluation step: ");
  const std::int64_t full = data.count;
  const std::int64_t k = validation.batches > 0 ? std::min(validation.batches, full) : full;
  std::vector<std::int64_t> chosen;
  for (std::int64_t i = 0; i < k; ++i) chosen.push_back(i * full / k);
  return Evaluator(std::move(*exec), std::move(data), std::move(chosen), globalBatch, program.splits, world, rank,
                   toScalarType(first->type().dtype), toScalarType(second->type().dtype), program.plan.peakBytes);
}

Expected<Evaluation> Evaluator::evaluate(TensorMap& state, const RunContext& context, Communicator* comm) {
  const bool onHost = exec_.device().isHost();
  std::int64_t peak = 0;
  const std::int64_t rows = globalBatch_ / world_, part = rows / splits_;
  double sum = 0;
  for (std::int64_t index : chosen_)
    for (int s = 0; s < splits_; ++s) {
      {  // the batch is staged into its planned buffers and let go before the run, as in training
        Expected<std::pair<at::Tensor, at::Tensor>> b = data_.batch(index);
        if (!b) return b.error();
        const std::int64_t from = rank_ * rows + s * part;
        TensorMap inputs{{data_.first, b->first.narrow(0, from, part).to(firstType_)},
                         {data_.second, b->second.narrow(0, from, part).to(secondType_)}};
        if (Status st = exec_.stageInputs(inputs); !st) return st.error().withContext("validation: ");
      }
      if (onHost && index == chosen_.front() && s == 0) MemoryTracker::resetPeak();
      Expected<TensorMap> out = exec_.run(TensorMap{}, state, context);
      if (!out) return out.error().withContext("validation: ");
      sum += out->at("loss").item<double>();
      if (!onHost) peak = std::max(peak, exec_.devicePeakBytes());
    }
  if (onHost) peak = MemoryTracker::peakBytes();
  Evaluation result;
  result.peakBytes = peak;
  double total = sum;
  if (comm && world_ > 1) {
    at::Tensor mine = at::zeros({1}, at::kDouble);
    mine[0] = sum;
    at::Tensor all = at::empty({world_}, at::kDouble);
    if (Status s = comm->allGather(mine, all, "all_gather of the ranks' validation losses"); !s)
      return s.error();
    total = 0;
    for (int r = 0; r < world_; ++r) total += all[r].item<double>();  // in rank order: the same sum everywhere
  }
  result.loss = total / static_cast<double>(world_ * splits_ * batches());
  return result;
}

}  // namespace gradc::runtime
