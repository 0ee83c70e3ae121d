// Trained weights for the commands that run a model without training it (eval, sample): a
// weights.safetensors file or a checkpoint folder, checked against the spec's model name, with
// the vocabulary the weights were trained with (the file's metadata, or the checkpoint's
// state.json for checkpoints from before the metadata; bytes when neither says).
#pragma once

#include <string>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/io/data.h"
#include "runtime/io/safetensors.h"

namespace gradc::tools {

struct TrainedWeights {
  runtime::SafetensorsFile file;
  runtime::Vocabulary vocabulary = runtime::Vocabulary::bytes();
  std::string path;  // the weights file read
};

Expected<TrainedWeights> loadTrainedWeights(const std::string& weightsOrFolder, const ir::Graph& graph);

}  // namespace gradc::tools
