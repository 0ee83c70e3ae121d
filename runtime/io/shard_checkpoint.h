// Sharded optimizer state (ZeRO, passes/shard_state.h) in the replicated layout of a checkpoint.
//
// A sharded rank holds, per gradient bucket and state kind, one [s] tensor: its shard of the
// bucket's parameters' state, flattened and concatenated (ir/shard_layout.h), described by the
// parameter's attributes shard_of (the bucket's parameters), shard_prefix ("opt.adam_m."),
// shard_offset and shard_world. Checkpoints always hold the replicated layout, one tensor per
// parameter ("opt.adam_m.fc1.weight"), so a run saved with N ranks sharded resumes replicated,
// on another number of ranks, or on one device, and a replicated checkpoint resumes sharded.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/core/tensor_map.h"

namespace gradc::runtime {

// What a shard holds: the parameters it cuts (names, shapes, element counts), the prefix of the
// replicated tensors' names ("opt.adam_m.", or "" for the parameters themselves under ZeRO
// stage 3), its offset in the flat bucket and the world it was cut for.
struct ShardInfo {
  std::vector<std::string> params;
  std::vector<ir::Shape> shapes;
  std::vector<std::int64_t> numels;
  std::string prefix;
  std::int64_t offset = 0;
  std::int64_t world = 1;
};
Expected<ShardInfo> shardInfo(const ir::Graph& graph, const ir::Value& shard);

// A parameter that holds one rank's shard of optimizer state (or, under stage 3, of the
// parameters).
bool isShardedState(const ir::Value& param);
// A rank's shard of a bucket's parameters (ZeRO stage 3, passes/shard_params.h).
bool isShardedParameter(const ir::Value& param);
// The model's parameters and running statistics (not its optimizer state) by name and type as
// the replicated model has them: a stage 3 shard stands for its bucket's parameters.
std::vector<std::pair<std::string, ir::TensorType>> modelParameters(const ir::Graph& graph);
bool hasShardedState(const ir::Graph& graph);

// The replicated state, on rank 0: every tensor of `state` that is not a shard as it is, and
// each bucket's shards of every rank gathered and cut into per-parameter tensors. The other ranks
// send their shards and get an empty map, so only rank 0 ever holds the whole state (outside
// the step's plan, while it saves). Collective: every rank calls it at the same point, with the
// same graph structure.
Expected<TensorMap> replicatedState(const ir::Graph& graph, const TensorMap& state, Communicator& comm);

// The other way, for a resume: this rank's shards cut from the per-parameter tensors of a
// replicated state, which they replace. `from` names the checkpoint in errors. With
// `parametersOnly`, only the parameter shards (stage 3: weights a fine-tune starts from).
Status shardReplicatedState(const ir::Graph& graph, TensorMap& state, const std::string& from,
                            bool parametersOnly = false);

}  // namespace gradc::runtime
