// Where a training run starts: resumed from a checkpoint (--resume: its state, step, data
// position, seed and vocabulary, checked against the graph and the run's settings) or fresh
// (parameters initialised from the seed, then --init-from's weights over them). The trainer
// (runtime/train/trainer.h) takes the state and continues from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/core/tensor_map.h"
#include "runtime/io/data.h"
#include "runtime/train/trainer.h"

namespace gradc::runtime {

struct StartingPoint {
  std::uint64_t seed = 0;
  std::int64_t firstStep = 1;
  DataPosition position;                 // the data's position (a checkpoint's), or the start
  std::optional<Vocabulary> vocabulary;  // what token ids meant to the checkpoint or initial weights
  std::string resumedShape;              // the checkpoint's global batch x seq, when it says
  std::string resumedFrom;               // the checkpoint read, when resuming
  std::vector<std::string> resumeNotes;  // optimizer settings that differ from the checkpoint's
};

// Fills `state` (the graph's parameters and optimizer state: a sharded rank keeps its shard) and
// says where the run starts. `config` is the run's configuration, compared with the checkpoint's.
Expected<StartingPoint> startingPoint(const ir::Graph& g, const TrainerOptions& o, const nlohmann::json& config,
                                     TensorMap& state);

}  // namespace gradc::runtime
