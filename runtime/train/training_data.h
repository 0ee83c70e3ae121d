// What a training run reads: its language-model or image data (runtime/io/data.h,
// runtime/io/image_data.h) bound to the step graph's inputs, each rank taking its rows of the
// global batch. The trainer (runtime/train/trainer.h) makes one of these per run.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/io/data.h"
#include "runtime/io/image_data.h"
#include "runtime/train/trainer.h"

namespace gradc::runtime {

// The graph's input named `name`, or nullptr.
const ir::Value* inputNamed(const ir::Graph& g, std::string_view name);

// Data for language-model graphs (inputs `tokens` and `targets`).
struct TokenData {
  Batcher batcher;
  std::int64_t tokensPerStep;
  at::ScalarType tokenType, targetType;  // of the graph's inputs (i64 or i32)
  bool checkIds = false;                 // a token file: ids are checked batch by batch
  std::optional<Vocabulary> vocabulary;  // of a file (validation reads with it); nullopt: synthetic
};

// From --data (text or a token file, read with `restoredVocab` when resuming) or synthetic
// tokens, positioned at `position`; records the sampling, batch shape and vocabulary in `config`.
Expected<TokenData> makeTokenData(const ir::Graph& g, const TrainerOptions& o, std::uint64_t seed,
                                  const std::optional<Vocabulary>& restoredVocab, const DataPosition& position,
                                  nlohmann::json& config, int world);

// Data for image classifiers (inputs `images` [batch, C, H, W] and `labels` [batch]) from --data
// (runtime/io/image_data.h); without --data they get synthetic values like any input.
struct ImageData {
  ImageBatcher batcher;
  at::ScalarType imageType, labelType;  // of the graph's inputs
};

Expected<ImageData> makeImageData(const ImageInputs& in, const TrainerOptions& o, std::uint64_t seed,
                                  const DataPosition& position, nlohmann::json& config, int world);

}  // namespace gradc::runtime
