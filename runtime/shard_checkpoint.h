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

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/communicator.h"
#include "runtime/tensor_map.h"

namespace gradc::runtime {

// A parameter that holds one rank's shard of optimizer state.
bool isShardedState(const ir::Value& param);
bool hasShardedState(const ir::Graph& graph);

// The replicated state, on rank 0: every tensor of `state` that is not a shard as it is, and
// each bucket's shards of every rank gathered and cut into per-parameter tensors. The other ranks
// send their shards and get an empty map, so only rank 0 ever holds the whole state (outside
// the step's plan, while it saves). Collective: every rank calls it at the same point, with the
// same graph structure.
Expected<TensorMap> replicatedState(const ir::Graph& graph, const TensorMap& state, Communicator& comm);

// The other way, for a resume: this rank's shards cut from the per-parameter tensors of a
// replicated state, which they replace. `from` names the checkpoint in errors.
Status shardReplicatedState(const ir::Graph& graph, TensorMap& state, const std::string& from);

}  // namespace gradc::runtime
