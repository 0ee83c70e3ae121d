// gradc eval SPEC --weights W --data FILE: the mean loss in evaluation mode (dropout off,
// batch norm with its running statistics) over every window of a text file (language models),
// or over every image of a safetensors file of `images` and `labels` (image classifiers, with
// the top-1 accuracy). W is a weights.safetensors file or a checkpoint folder (whose stored
// vocabulary is then used).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/io/atomic_file.h"
#include "runtime/io/checkpoint.h"
#include "runtime/io/data.h"
#include "runtime/io/image_data.h"
#include "runtime/core/json_text.h"
#include "runtime/io/safetensors.h"
#include "tools/commands.h"
#include "tools/evaluation_step.h"
#include "tools/spec_loading.h"
#include "tools/trained_weights.h"

namespace gradc::tools {

namespace {
struct EvalOptions {
  std::string spec;
  bool noFuse = false;  // --no-fuse: attention as its decomposition
  std::vector<std::string> sets;
  std::string weights;
  std::string data;
};

int fail(const std::string& message, int code = kExitUserError) {
  std::cerr << "gradc: error: " << message << "\n";
  return code;
}

// The image-classifier path: every full batch of the file, in file order.
int evalImages(ir::Graph& graph, const runtime::ImageInputs& in, runtime::SafetensorsFile& weights,
               const std::string& path) {
  Expected<runtime::ImageDataset> data = runtime::loadImagesFor(path, in);
  if (!data) return fail(data.error().message);
  // The logits of a cross_entropy loss, for the accuracy.
  const ir::Value* loss = graph.findOutput("loss");
  const bool classifier = loss && loss->producer() && loss->producer()->op().role == ir::OpRole::ClassificationLoss;
  if (classifier) graph.setOutput("logits", loss->producer()->operand(0));
  Expected<runtime::Executor> exec = runtime::Executor::create(graph);
  if (!exec) return fail(exec.error().message, kExitInternal);
  const std::int64_t batch = in.images->type().shape[0];
  double sum = 0;
  std::int64_t counted = 0, correct = 0;
  for (std::int64_t first = 0; first + batch <= data->size(); first += batch) {
    runtime::ImageBatch b = runtime::imageRange(*data, first, batch);
    runtime::TensorMap inputs{{"images", b.images.to(runtime::toScalarType(in.images->type().dtype))},
                              {"labels", b.labels.to(runtime::toScalarType(in.labels->type().dtype))}};
    Expected<runtime::TensorMap> out = exec->run(inputs, weights.tensors, runtime::RunContext{});
    if (!out) return fail(out.error().message);
    sum += out->at("loss").item<double>();
    if (classifier) correct += out->at("logits").argmax(-1).eq(b.labels).sum().item<std::int64_t>();
    ++counted;
  }
  if (counted == 0) return fail("'" + path + "' has fewer images than one batch of " + std::to_string(batch));
  std::cout << "loss " << sum / static_cast<double>(counted);
  if (classifier)
    std::cout << ", accuracy " << static_cast<double>(correct) / static_cast<double>(counted * batch);
  std::cout << " over " << counted * batch << " images";
  if (const std::int64_t left = data->size() - counted * batch) std::cout << " (" << left << " of a short last batch left out)";
  std::cout << "\n";
  return kExitOk;
}

int runEval(const EvalOptions& o) {
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, o.sets, exitCode);
  if (!graph) return exitCode;
  if (Status s = prepareInference(*graph, !o.noFuse); !s) return fail(s.message());

  // The weights and the vocabulary they were trained with (tools/trained_weights.h).
  Expected<TrainedWeights> trained = loadTrainedWeights(o.weights, *graph);
  if (!trained) return fail(trained.error().message);
  runtime::SafetensorsFile* weights = &trained->file;
  const runtime::Vocabulary& vocab = trained->vocabulary;

  const ir::Value* tokens = graph->findNamed("tokens");
  if (!tokens || tokens->type().rank() != 2)
    if (std::optional<runtime::ImageInputs> images = runtime::imageInputs(*graph))
      return evalImages(*graph, *images, *weights, o.data);
  if (!tokens || !graph->findNamed("targets") || tokens->type().rank() != 2)
    return fail("gradc eval reads text into `tokens`/`targets` inputs, or a safetensors file into `images`/`labels` "
                "inputs; this model has neither");
  std::int64_t batch = tokens->type().shape[0], seq = tokens->type().shape[1];
  Expected<runtime::TextDataset> data = runtime::TextDataset::fromFile(o.data, vocab);
  if (!data) return fail(data.error().message);
  Expected<runtime::EvalBatches> batches = runtime::EvalBatches::create(*data, batch, seq);
  if (!batches) return fail(batches.error().message);
  Expected<runtime::Executor> exec = runtime::Executor::create(*graph);
  if (!exec) return fail(exec.error().message, kExitInternal);

  double sum = 0;
  std::int64_t counted = 0, skipped = 0;
  while (std::optional<runtime::Batch> b = batches->next()) {
    if (b->tokens.size(0) != batch) {  // the graph's batch is static: a short last batch is left out
      skipped += b->tokens.size(0);
      continue;
    }
    runtime::TensorMap inputs{{"tokens", b->tokens}, {"targets", b->targets}};
    Expected<runtime::TensorMap> out = exec->run(inputs, weights->tensors, runtime::RunContext{});
    if (!out) return fail(out.error().message);
    sum += out->at("loss").item<double>();
    ++counted;
  }
  if (counted == 0) return fail("'" + o.data + "' has fewer windows than one batch of " + std::to_string(batch));
  std::cout << "loss " << sum / static_cast<double>(counted) << " over " << counted * batch << " windows of " << seq
            << " tokens";
  if (skipped) std::cout << " (" << skipped << " windows of a short last batch left out)";
  std::cout << "\n";
  return kExitOk;
}
}  // namespace

Runner addEvalCommand(CLI::App& cmd) {
  auto o = std::make_shared<EvalOptions>();
  cmd.add_option("spec", o->spec, "The YAML model spec")->required();
  cmd.add_option("--set", o->sets, "Override a dim: --set batch=4 (repeatable)");
  cmd.add_option("--weights", o->weights, "weights.safetensors, or a checkpoint folder")->required();
  cmd.add_option("--data", o->data, "Text file (language models) or safetensors file of images and labels to evaluate on")
      ->required();
  cmd.add_flag("--no-fuse", o->noFuse,
               "Run attention as its decomposition (default: fused attention, which never holds the [S, S] scores)");
  return [o] { return runEval(*o); };
}

}  // namespace gradc::tools
