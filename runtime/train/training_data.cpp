#include "runtime/train/training_data.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ir/index_bounds.h"
#include "runtime/core/dtype_map.h"
#include "runtime/io/token_file.h"

namespace gradc::runtime {

const ir::Value* inputNamed(const ir::Graph& g, std::string_view name) {
  for (const auto& v : g.inputs())
    if (v->name() == name) return v.get();
  return nullptr;
}

Expected<TokenData> makeTokenData(const ir::Graph& g, const TrainerOptions& o, std::uint64_t seed,
                                  const std::optional<Vocabulary>& restoredVocab, const DataPosition& position,
                                  nlohmann::json& config, int world) {
  const ir::Value* tokens = inputNamed(g, "tokens");
  const ir::Value* targets = inputNamed(g, "targets");
  BatcherOptions bo;
  bo.batch = tokens->type().shape[0] * world;  // the global batch; each rank keeps its rows
  bo.seq = tokens->type().shape[1];
  bo.seed = seed;
  bo.randomWindows = o.randomWindows;
  config["sampling"] = o.randomWindows ? "random" : "epoch";
  config["batch_shape"] = std::to_string(bo.batch) + "x" + std::to_string(bo.seq);
  std::optional<ir::IndexBound> tokenBound = ir::indexBound(*tokens);
  std::optional<ir::IndexBound> targetBound = ir::indexBound(*targets);
  std::int64_t limit = std::min(tokenBound ? tokenBound->bound : 256, targetBound ? targetBound->bound : 256);
  std::optional<Batcher> batcher;
  bool checkIds = false;
  std::optional<Vocabulary> fileVocabulary;
  if (o.data) {
    std::optional<Vocabulary> vocabulary = restoredVocab;
    if (!vocabulary && (o.tokenVocabulary || hasLlmcTokenHeader(*o.data))) {
      Expected<Vocabulary> ids = Vocabulary::tokenIds(o.tokenVocabulary.value_or(limit));
      if (!ids) return ids.error().withContext("--vocab-size: ");
      vocabulary = *ids;
    }
    Expected<TextDataset> data = vocabulary ? TextDataset::fromFile(*o.data, *vocabulary)
                                            : TextDataset::fromFile(*o.data, o.vocabulary);
    if (!data) return data.error();
    std::int64_t vocab = data->vocabulary().size();
    for (const auto& [bound, what] : {std::pair{tokenBound, "tokens"}, std::pair{targetBound, "targets"}})
      if (bound && vocab > bound->bound)
        return Error{"the data's vocabulary has " + std::to_string(vocab) + " symbols, but " + what + " feed " +
                     bound->op + " '" + bound->specName + "', which has " + std::to_string(bound->bound) +
                     (vocab == 256 ? " (use --vocab chars for a compact character vocabulary, or raise the model's vocab)"
                                   : " (raise the model's vocab)")};
    config["vocabulary"] = data->vocabulary().serialize();
    checkIds = data->isTokenFile();
    fileVocabulary = data->vocabulary();
    Expected<Batcher> b = Batcher::create(*data, bo);
    if (!b) return b.error();
    batcher = std::move(*b);
  } else {
    Expected<Batcher> b = Batcher::synthetic(limit, bo);
    if (!b) return b.error();
    batcher = std::move(*b);
    config["vocabulary"] = "synthetic:" + std::to_string(limit);
  }
  if (Status s = batcher->setPosition(position); !s) return s.error();
  return TokenData{std::move(*batcher), bo.batch * bo.seq, toScalarType(tokens->type().dtype),
                   toScalarType(targets->type().dtype), checkIds, std::move(fileVocabulary)};
}

Expected<ImageData> makeImageData(const ImageInputs& in, const TrainerOptions& o, std::uint64_t seed,
                                  const DataPosition& position, nlohmann::json& config, int world) {
  Expected<ImageDataset> data = loadImagesFor(*o.data, in);
  if (!data) return data.error();
  // The global batch; each rank keeps its rows.
  Expected<ImageBatcher> batcher = ImageBatcher::create(*data, in.images->type().shape[0] * world, seed);
  if (!batcher) return batcher.error();
  if (Status s = batcher->setPosition(position); !s) return s.error();
  config["data"] = "images:" + std::to_string(data->size());
  return ImageData{std::move(*batcher), toScalarType(in.images->type().dtype), toScalarType(in.labels->type().dtype)};
}

}  // namespace gradc::runtime
