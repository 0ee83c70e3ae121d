#include "runtime/evaluation.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <chrono>

#include "runtime/dtype_map.h"
#include "runtime/memory_tracker.h"

namespace gradc::runtime {

namespace {

const ir::Value* inputNamed(const ir::Graph& g, std::string_view name) {
  for (const auto& v : g.inputs())
    if (v->name() == name) return v.get();
  return nullptr;
}

}  // namespace

Expected<Evaluator> Evaluator::create(const EvaluationProgram& program, const Executor& host,
                                      const ExecutorOptions& options, const ValidationOptions& validation,
                                      const Vocabulary& vocabulary, std::int64_t globalBatch, std::int64_t seq,
                                      int world, int rank) {
  const ir::Value* tokens = inputNamed(program.graph, "tokens");
  const ir::Value* targets = inputNamed(program.graph, "targets");
  const std::int64_t rows = globalBatch / world;
  if (!tokens || !targets || tokens->type().rank() != 2 || tokens->type().shape[1] != seq ||
      tokens->type().shape[0] * program.splits != rows || program.graph.inputs().size() != 2 ||
      !program.graph.findOutput("loss"))
    return Error{"the artifact's evaluation step does not evaluate rows of this training step's batches (tokens "
                 "and targets of " + std::to_string(rows / std::max(program.splits, 1)) + " x " + std::to_string(seq) +
                 ", output loss): was it edited?"};
  ExecutorOptions eo = options;
  eo.arenaOf = &host;
  Expected<Executor> exec = Executor::create(program.graph, program.plan, eo);
  if (!exec) return Error{"the evaluation step: " + exec.error().message};

  Expected<TextDataset> data = TextDataset::fromFile(validation.data, vocabulary);
  if (!data) {
    const bool symbol = data.error().message.find("not in the vocabulary") != std::string::npos;
    return Error{"--val-data: " + data.error().message +
                 (symbol ? " (validation reads with the training data's vocabulary: with --vocab chars, the symbols "
                           "of --data; --vocab bytes reads every file)"
                         : "")};
  }
  const bool checkIds = data->isTokenFile();
  Expected<EvalBatches> batches = EvalBatches::create(std::move(*data), globalBatch, seq);
  if (!batches) return Error{"--val-data: " + batches.error().message};
  const std::int64_t full = batches->fullBatches();
  if (full == 0)
    return Error{"--val-data '" + validation.data.string() + "' has " + std::to_string(batches->windowCount()) +
                 " windows of " + std::to_string(seq) + " tokens, fewer than one batch of " +
                 std::to_string(globalBatch)};
  const std::int64_t k = validation.batches > 0 ? std::min(validation.batches, full) : full;
  std::vector<std::int64_t> chosen;
  for (std::int64_t i = 0; i < k; ++i) chosen.push_back(i * full / k);
  Evaluator e(std::move(*exec), std::move(*batches), std::move(chosen), globalBatch, program.splits, world, rank,
              toScalarType(tokens->type().dtype), toScalarType(targets->type().dtype), checkIds,
              program.plan.peakBytes);
  e.vocabSize_ = vocabulary.size();
  e.path_ = validation.data;
  return e;
}

Expected<Evaluation> Evaluator::evaluate(TensorMap& state, const RunContext& context, Communicator* comm) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool onHost = exec_.device().isHost();
  std::int64_t peak = 0;
  const std::int64_t rows = globalBatch_ / world_, part = rows / splits_;
  double sum = 0;
  for (std::int64_t index : chosen_)
    for (int s = 0; s < splits_; ++s) {
      {  // the batch is staged into its planned buffers and let go before the run, as in training
        batches_.seekBatch(index);
        std::optional<Batch> b = batches_.next();
        if (!b) return Error{"--val-data: batch " + std::to_string(index) + " is missing"};
        if (checkIds_ && s == 0) {
          const std::int64_t largest =
              std::max(b->tokens.max().item<std::int64_t>(), b->targets.max().item<std::int64_t>());
          if (largest >= vocabSize_)
            return Error{"--val-data '" + path_.string() + "' holds token " + std::to_string(largest) +
                         ", outside the vocabulary of " + std::to_string(vocabSize_)};
        }
        const std::int64_t first = rank_ * rows + s * part;
        TensorMap inputs{{"tokens", b->tokens.narrow(0, first, part).to(tokenType_)},
                         {"targets", b->targets.narrow(0, first, part).to(targetType_)}};
        if (Status st = exec_.stageInputs(inputs); !st) return Error{"validation: " + st.message()};
      }
      if (onHost && index == chosen_.front() && s == 0) MemoryTracker::resetPeak();
      Expected<TensorMap> out = exec_.run(TensorMap{}, state, context);
      if (!out) return Error{"validation: " + out.error().message};
      sum += out->at("loss").item<double>();
      if (!onHost) peak = std::max(peak, exec_.devicePeakBytes());
    }
  if (onHost) peak = MemoryTracker::peakBytes();
  Evaluation result;
  result.batches = batches();
  result.peakBytes = peak;
  double total = sum;
  if (comm && world_ > 1) {
    at::Tensor mine = at::zeros({1}, at::kDouble);
    mine[0] = sum;
    at::Tensor all = at::empty({world_}, at::kDouble);
    if (Status s = comm->allGather(mine, all, "all_gather of the ranks' validation losses"); !s)
      return Error{s.message()};
    total = 0;
    for (int r = 0; r < world_; ++r) total += all[r].item<double>();  // in rank order: the same sum everywhere
  }
  result.loss = total / static_cast<double>(world_ * splits_ * batches());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace gradc::runtime
