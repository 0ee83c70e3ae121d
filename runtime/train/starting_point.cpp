#include "runtime/train/starting_point.h"

#include "runtime/core/json_text.h"
#include "runtime/exec/executor.h"
#include "runtime/io/checkpoint.h"
#include "runtime/io/shard_checkpoint.h"
#include "runtime/train/init.h"
#include "runtime/train/init_from.h"

namespace gradc::runtime {

namespace {

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

}  // namespace

Expected<StartingPoint> startingPoint(const ir::Graph& g, const TrainerOptions& o, const nlohmann::json& config,
                                     TensorMap& state) {
  StartingPoint start;
  start.seed = o.seed;
  if (o.resumeDir) {
    Expected<CheckpointData> ck = loadCheckpoint(*o.resumeDir);
    if (!ck) return ck.error();
    for (auto* part : {&ck->weights, &ck->optimizer})
      for (auto& [name, t] : *part) state.emplace(name, t);
    // A checkpoint holds replicated state; a sharded rank keeps its shard of it.
    if (Status s = shardReplicatedState(g, state, ck->loaded_from.string()); !s) return s.error();
    if (Status s = checkState(g, state, ck->loaded_from); !s) return s.error();
    start.seed = ck->seed;
    start.firstStep = ck->step + 1;
    start.position = ck->data;
    nlohmann::json saved = parseJsonBounded(ck->config);
    if (saved.is_object() && saved.contains("batch_shape") && saved["batch_shape"].is_string())
      start.resumedShape = saved["batch_shape"].get<std::string>();
    start.resumedFrom = ck->loaded_from.string();
    // The optimizer settings are the run's to choose (a lower --lr to continue is common), but
    // one that differs from the checkpoint's is said, as PyTorch's restored param_groups would
    // have kept it.
    if (saved.is_object())
      for (const char* key : {"optimizer", "lr", "min_lr", "weight_decay", "momentum", "betas", "eps", "decay",
                              "clip_norm", "warmup_steps", "decay_steps"})
        if (saved.contains(key) && config.contains(key) && saved[key] != config[key])
          start.resumeNotes.push_back(std::string(key) + " " + saved[key].dump() + " -> " + config[key].dump());
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
        start.vocabulary = *vocab;
      }
    }
    if (start.firstStep > o.steps)
      return Error{"the checkpoint in " + ck->loaded_from.string() + " is at step " + std::to_string(ck->step) +
                   "; --steps " + std::to_string(o.steps) + " leaves nothing to do"};
  } else {
    Expected<TensorMap> init = initParameters(g, start.seed);
    if (!init) return init.error();
    state = std::move(*init);
    if (o.initFrom) {
      Expected<InitialWeights> weights = loadInitialWeights(*o.initFrom);
      if (!weights) return weights.error();
      if (Status s = applyInitialWeights(g, state, *weights); !s) return s.error();
      // Token ids mean what they meant when the weights were trained.
      if (weights->vocabulary && weights->vocabulary->rfind("synthetic:", 0) != 0) {
        Expected<Vocabulary> vocab = Vocabulary::parse(*weights->vocabulary);
        if (!vocab) return vocab.error().withContext("--init-from " + weights->source + ": ");
        start.vocabulary = *vocab;
      }
    }
  }
  return start;
}

}  // namespace gradc::runtime
