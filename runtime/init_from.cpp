#include "runtime/init_from.h"

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <system_error>
#include <unordered_set>

#include "ir/tensor_type.h"
#include "runtime/checkpoint.h"
#include "runtime/dtype_map.h"
#include "runtime/json_text.h"
#include "runtime/safetensors.h"
#include "runtime/trainer.h"

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
  for (const auto& p : g.params()) {
    if (isOptimizerState(*p)) continue;
    auto loaded = weights.tensors.find(p->name());
    if (loaded == weights.tensors.end())
      return Error{from + "no tensor '" + p->name() + "', which the model needs (" + ir::toString(p->type()) + ")"};
    const at::Tensor& t = loaded->second;
    std::vector<std::int64_t> shape(p->type().shape.begin(), p->type().shape.end());
    if (t.sizes().vec() != shape)
      return Error{from + "'" + p->name() + "' is " + shapeText(t) + ", the model needs " + ir::toString(p->type())};
    const at::ScalarType want = toScalarType(p->type().dtype);
    if (at::isFloatingType(t.scalar_type()) != at::isFloatingType(want))
      return Error{from + "'" + p->name() + "' holds " + std::string(c10::toString(t.scalar_type())) +
                   " values, the model needs " + ir::toString(p->type())};
    auto slot = state.find(p->name());
    if (slot == state.end()) return Error{"internal: no initial value for '" + p->name() + "'", ErrorKind::Internal};
    slot->second = t.to(want).contiguous();
    taken.insert(p->name());
  }
  for (const auto& [name, t] : weights.tensors)
    if (!taken.count(name))
      return Error{from + "'" + name + "' (" + shapeText(t) + ") is not a parameter of this model" +
                   (g.findNamed(name) ? " that weights set" : "")};
  return {};
}

}  // namespace gradc::runtime
