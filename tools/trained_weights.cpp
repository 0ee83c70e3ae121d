#include "tools/trained_weights.h"

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/io/atomic_file.h"
#include "runtime/io/checkpoint.h"
#include "runtime/core/json_text.h"

namespace gradc::tools {

Expected<TrainedWeights> loadTrainedWeights(const std::string& weightsOrFolder, const ir::Graph& graph) {
  std::filesystem::path weightsPath = weightsOrFolder;
  std::optional<std::string> vocabText;
  const bool folder = std::filesystem::is_directory(weightsPath);
  Expected<runtime::SafetensorsFile> weights =
      folder ? runtime::loadCheckpointFile(weightsPath, "weights.safetensors") : runtime::loadSafetensors(weightsPath);
  if (folder) {
    Expected<std::string> stateText = runtime::readFile(weightsPath / "state.json");
    nlohmann::json j = runtime::parseJsonBounded(stateText ? *stateText : std::string());
    if (j.is_object() && j["config"].is_object() && j["config"]["vocabulary"].is_string())
      vocabText = j["config"]["vocabulary"].get<std::string>();
    weightsPath /= "weights.safetensors";
  }
  if (!weights) return weights.error();
  const std::string model = ir::getString(graph.attrs(), "model").value_or(graph.name());
  if (auto it = weights->metadata.find(runtime::kWeightsModelKey); it != weights->metadata.end() && it->second != model)
    return Error{"'" + weightsPath.string() + "' holds weights of model '" + it->second + "', but the spec is model '" +
                 model + "'"};
  if (auto it = weights->metadata.find(runtime::kWeightsVocabularyKey); it != weights->metadata.end())
    vocabText = it->second;
  TrainedWeights out{std::move(*weights), runtime::Vocabulary::bytes(), weightsPath.string()};
  if (vocabText && vocabText->rfind("synthetic:", 0) != 0) {
    Expected<runtime::Vocabulary> v = runtime::Vocabulary::parse(*vocabText);
    if (!v) return v.error().withContext("'" + weightsPath.string() + "': its vocabulary cannot be read: ");
    out.vocabulary = *v;
  }
  return out;
}

}  // namespace gradc::tools
