#include "runtime/train/init_from.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <system_error>
#include <unordered_set>

#include "ir/tensor_type.h"
#include "runtime/core/dtype_map.h"
#include "runtime/io/checkpoint.h"
#include "runtime/core/json_text.h"
#include "runtime/io/safetensors.h"
#include "runtime/io/shard_checkpoint.h"
#include "runtime/train/trainer.h"

namespace gradc::runtime {
namespace {

std::string shapeText(const at::Tensor& t) {
  std::string s = "[";
  for (std::int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

}  // namespace

Expected<InitialWeights> loadInitialWeights(const std::filesystem::path& from) {
  InitialWeights w;
  w.source = from.string();
  std::error_code ec;
  if (std::filesystem::is_directory(from, ec)) {
    Expected<CheckpointData> ck = loadCheckpoint(from);
    if (!ck) return ck.error().withContext("--init-from: ");
    w.tensors = std::move(ck->weights);
    w.source = ck->loaded_from.string();
    const nlohmann::json config = parseJsonBounded(ck->config);
    if (config.is_object() && config.contains("vocabulary") && config["vocabulary"].is_string())
      w.vocabulary = config["vocabulary"].get<std::string>();
    return w;
  }
  Expected<SafetensorsFile> file = loadSafetensors(from);
  if (!file) return file.error().withContext("--init-from: ");
  w.tensors = std::move(file->tensors);
  if (auto it = file->metadata.find(kWeightsVocabularyKey); it != file->metadata.end()) w.vocabulary = it->second;
  return w;
}

Status applyInitialWeights(const ir::Graph& g, TensorMap& state, const InitialWeights& weights) {
  const std::string from = "--init-from " + weights.source + ": ";
  std::unordered_set<std::string> taken;
  // Under ZeRO stage 3 the graph holds shards: the weights are its replicated parameters, cut
  // into this rank's shards once all are in place.
  bool shards = false;
  for (const auto& p : g.params()) shards = shards || isShardedParameter(*p);
  for (const auto& [name, type] : modelParameters(g)) {
    auto loaded = weights.tensors.find(name);
    if (loaded == weights.tensors.end())
      return Error{from + "no tensor '" + name + "', which the model needs (" + ir::toString(type) + ")"};
    const at::Tensor& t = loaded->second;
    std::vector<std::int64_t> shape(type.shape.begin(), type.shape.end());
    if (t.sizes().vec() != shape)
      return Error{from + "'" + name + "' is " + shapeText(t) + ", the model needs " + ir::toString(type)};
    const at::ScalarType want = toScalarType(type.dtype);
    if (at::isFloatingType(t.scalar_type()) != at::isFloatingType(want))
      return Error{from + "'" + name + "' holds " + std::string(c10::toString(t.scalar_type())) +
                   " values, the model needs " + ir::toString(type)};
    const ir::Value* own = g.findNamed(name);
    if (own && state.find(name) == state.end())
      return Error{"internal: no initial value for '" + name + "'", ErrorKind::Internal};
    state[name] = t.to(want).contiguous();
    taken.insert(name);
  }
  for (const auto& [name, t] : weights.tensors)
    if (!taken.count(name))
      return Error{from + "'" + name + "' (" + shapeText(t) + ") is not a parameter of this model" +
                   (g.findNamed(name) ? " that weights set" : "")};
  if (shards) return shardReplicatedState(g, state, weights.source, /*parametersOnly=*/true);
  return {};
}

}  // namespace gradc::runtime
