// Fine-tuning's starting point (gradc train --init-from): the parameters of a weights file
// (safetensors, named as gradc names them: a checkpoint's weights.safetensors, or Hugging Face
// weights renamed by scripts/gpt2_to_hf.py --reverse) or of a checkpoint folder, loaded by name
// before step 1, with a fresh optimizer and schedule.
//
// Strict, as torch's load_state_dict(strict=True): every parameter of the model that is not
// optimizer state (batch-norm running statistics included) must be in the file with the
// parameter's shape, and every tensor of the file must be such a parameter; each failure is an
// Error that names the tensor. Floating-point values are converted to the parameter's dtype,
// as load_state_dict's copy does; an integer tensor for a float parameter (or the reverse) is
// refused.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/core/tensor_map.h"

namespace gradc::runtime {

struct InitialWeights {
  TensorMap tensors;
  // The vocabulary the weights were trained with (Vocabulary::serialize), from the file's
  // metadata or the checkpoint's configuration; nullopt when it does not say.
  std::optional<std::string> vocabulary;
  std::string source;  // the file or folder read, for messages
};

// A directory is read as a checkpoint (its weights and configuration; its optimizer state and
// step are not used), anything else as a safetensors file.
Expected<InitialWeights> loadInitialWeights(const std::filesystem::path& from);

// Replaces, in `state` (the model's freshly initialised parameters and optimizer state), every
// parameter of `g` that is not optimizer state by the loaded tensor of its name.
Status applyInitialWeights(const ir::Graph& g, TensorMap& state, const InitialWeights& weights);

}  // namespace gradc::runtime
