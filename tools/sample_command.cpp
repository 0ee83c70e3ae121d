// gradc sample SPEC --weights W|DIR [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
//              [--seed S] [--set k=v]...
//
// Text from a trained language model, one token at a time, printed as it is produced. The spec is
// compiled for inference (dropout off, batch-norm running statistics, batch 1; the loss's logits
// an output) and run by the executor. Each new token runs the forward over the last `seq`
// tokens of the text, placed at positions 0.. with the rest of the window zero: causal attention
// keeps the padding out of the logits that are read (those of the last real token). There is no
// key-value cache, so a token costs one forward of the whole window (seq positions) rather than
// one position's: at gpt-mini's sizes a few milliseconds.
//
// Decoding: logits / temperature, the top K kept (0: all), softmax in f64, and a draw from a
// SplitMix64 stream seeded by --seed, so a seed gives the same text every time. The prompt and
// the output go through the weights' vocabulary (bytes or characters); a token-id vocabulary
// (token files) has no text to print and is refused.
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>

#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/io/data.h"
#include "tools/commands.h"
#include "tools/evaluation_step.h"
#include "tools/flag_checks.h"
#include "tools/spec_loading.h"
#include "tools/trained_weights.h"

namespace gradc::tools {
namespace {

struct SampleOptions {
  std::string spec;
  bool noFuse = false;  // --no-fuse: attention as its decomposition
  std::vector<std::string> sets;
  std::string weights;
  std::string prompt;
  std::int64_t tokens = 200;
  double temperature = 1.0;
  std::int64_t topK = 0;
  std::uint64_t seed = 0;
};

int fail(const std::string& message, int code = kExitUserError) {
  std::cerr << "gradc: error: " << message << "\n";
  return code;
}

// The index drawn from `logits` (a row of the vocabulary's scores).
std::int64_t draw(const at::Tensor& logits, double temperature, std::int64_t topK, runtime::SplitMix64& rng) {
  const at::Tensor row = logits.to(at::kDouble).contiguous();
  const double* z = row.data_ptr<double>();
  const auto n = static_cast<std::int64_t>(row.numel());
  std::vector<std::int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const std::int64_t kept = topK > 0 ? std::min(topK, n) : n;
  // Ties broken by the lower id, so the draw does not depend on the sort's implementation.
  std::partial_sort(order.begin(), order.begin() + kept, order.end(),
                    [&](std::int64_t a, std::int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  order.resize(static_cast<size_t>(kept));
  std::vector<double> p(order.size());
  const double top = z[order[0]];
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) total += p[i] = std::exp((z[order[i]] - top) / temperature);
  // A uniform in [0, 1) with 53 random bits.
  const double u = static_cast<double>(rng.next() >> 11) * 0x1.0p-53 * total;
  double cumulative = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    cumulative += p[i];
    if (u < cumulative) return order[i];
  }
  return order.back();
}

int runSample(const SampleOptions& o) {
  std::vector<std::string> sets = o.sets;
  const bool batchSet = std::any_of(sets.begin(), sets.end(), [](const std::string& s) { return s.rfind("batch=", 0) == 0; });
  if (!batchSet) sets.push_back("batch=1");
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, sets, exitCode);
  if (!graph) return exitCode;
  const ir::Value* tokens = graph->findNamed("tokens");
  const ir::Value* targets = graph->findNamed("targets");
  const ir::Value* loss = graph->findOutput("loss");
  const ir::Node* head = loss ? loss->producer() : nullptr;
  if (!tokens || !targets || tokens->type().rank() != 2 || !head || head->op().role != ir::OpRole::ClassificationLoss ||
      head->operand(0)->type().rank() != 3)
    return fail("gradc sample needs a language model: `tokens` and `targets` inputs [batch, seq] and a cross_entropy "
                "loss over logits [batch, seq, vocab]; '" + o.spec + "' is not one");
  graph->setOutput("logits", head->operand(0));
  if (Status s = prepareInference(*graph, !o.noFuse); !s) return fail(s.message());

  Expected<TrainedWeights> trained = loadTrainedWeights(o.weights, *graph);
  if (!trained) return fail(trained.error().message);
  const runtime::Vocabulary& vocab = trained->vocabulary;
  if (vocab.isTokenIds())
    return fail("the weights were trained on token ids (" + vocab.serialize() +
                ", a token file); gradc sample prints text of a byte or character vocabulary only");
  const std::int64_t batch = tokens->type().shape[0], seq = tokens->type().shape[1];
  const std::int64_t classes = head->operand(0)->type().shape[2];
  if (vocab.size() > classes)
    return fail("the weights' vocabulary has " + std::to_string(vocab.size()) + " symbols, the model's logits " +
                std::to_string(classes));

  std::vector<std::int64_t> text;
  for (size_t i = 0; i < o.prompt.size(); ++i) {
    std::optional<std::uint8_t> t = vocab.encode(static_cast<unsigned char>(o.prompt[i]));
    if (!t)
      return fail("--prompt: byte " + std::to_string(static_cast<unsigned char>(o.prompt[i])) + " at offset " +
                  std::to_string(i) + " is not in the weights' vocabulary");
    text.push_back(*t);
  }
  if (text.empty()) {  // start from a newline when the vocabulary has one, as a text would
    std::optional<std::uint8_t> newline = vocab.encode('\n');
    text.push_back(newline ? *newline : 0);
  }

  Expected<runtime::Executor> exec = runtime::Executor::create(*graph);
  if (!exec) return fail(exec.error().message, kExitInternal);
  const at::TensorOptions tokenType = at::TensorOptions().dtype(runtime::toScalarType(tokens->type().dtype));
  const at::Tensor targetInput = at::zeros({batch, seq}, at::TensorOptions().dtype(runtime::toScalarType(targets->type().dtype)));
  runtime::SplitMix64 rng(o.seed ^ 0x53414d504c45ull);  // "SAMPLE"
  std::cout << o.prompt << std::flush;
  for (std::int64_t produced = 0; produced < o.tokens; ++produced) {
    const std::int64_t start = std::max<std::int64_t>(0, static_cast<std::int64_t>(text.size()) - seq);
    const std::int64_t length = static_cast<std::int64_t>(text.size()) - start;
    at::Tensor window = at::zeros({batch, seq}, at::TensorOptions().dtype(at::kLong));
    std::int64_t* w = window.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < length; ++i) w[i] = text[static_cast<size_t>(start + i)];
    runtime::TensorMap inputs{{"tokens", window.to(tokenType)}, {"targets", targetInput}};
    Expected<runtime::TensorMap> out = exec->run(inputs, trained->file.tensors, runtime::RunContext{o.seed, 0});
    if (!out) return fail(out.error().message);
    const at::Tensor logits = out->at("logits")[0][length - 1].slice(0, 0, vocab.size());
    const std::int64_t next = draw(logits, o.temperature, o.topK, rng);
    text.push_back(next);
    std::cout << vocab.decode(next) << std::flush;
  }
  std::cout << "\n";
  return std::cout ? kExitOk : kExitInternal;
}

}  // namespace

Runner addSampleCommand(CLI::App& cmd) {
  auto o = std::make_shared<SampleOptions>();
  cmd.add_option("spec", o->spec, "The language model's YAML spec")->required();
  cmd.add_option("--set", o->sets, "Override a dim, as for training (batch is 1 unless set)");
  cmd.add_option("--weights", o->weights, "weights.safetensors, or a checkpoint folder")->required();
  cmd.add_option("--prompt", o->prompt, "Text to continue (default: a newline)");
  cmd.add_option("--tokens", o->tokens, "Tokens to generate")->check(integerIn(0, 1000000))->capture_default_str();
  cmd.add_option("--temperature", o->temperature, "Divides the logits: below 1 sharper, above 1 flatter")
      ->check(positiveNumber())
      ->check(numberIn(0, 1e6, /*closedHigh=*/true))
      ->capture_default_str();
  cmd.add_option("--top-k", o->topK, "Draw from the K likeliest tokens only (0: all)")
      ->check(integerIn(0, 1 << 30))
      ->capture_default_str();
  cmd.add_option("--seed", o->seed, "The draws' seed: the same seed, the same text")->capture_default_str();
  cmd.add_flag("--no-fuse", o->noFuse,
               "Run attention as its decomposition (default: fused attention, which never holds the [S, S] scores)");
  return [o] { return runSample(*o); };
}

}  // namespace gradc::tools
