// Sharding what every data-parallel rank would otherwise duplicate (ZeRO, Rajbhandari et al.,
// SC 2020): the optimizer state (stage 1) and also the reduced gradients (stage 2), partitioned
// over the ranks bucket by bucket; stage 3 is stage 2 followed by passes/shard_params.h, which
// shards the parameters too.
//
// shardOptimizerState(graph, options) runs after the collectives (passes/data_parallel.h) and
// the optimizer (passes/optimizer.h), before dead-code elimination, on one rank's graph. For
// every gradient bucket (all_reduce_start with bucket >= 0) of L elements, with s = ceil(L / N)
// (ir/shard_layout.h: the bucket padded to N s, rank r owning elements [r s, r s + s)):
//   1. The per-parameter optimizer state of the bucket's parameters is replaced by [s] state
//      tensors of this rank's shard (opt.adam_m.bucket<k>, ...; attributes shard_of = the
//      parameters, comma-separated, shard_offset = r s, shard_world = N, shard_prefix = the
//      replicated state's name prefix), so a checkpoint can be written and read in the
//      replicated layout (runtime/io/shard_checkpoint.h).
//   2. Stage 2 only: the bucket's all_reduce_start/all_reduce_wait become reduce_scatter_start
//      (same seq, same place) and reduce_scatter_wait, placed right after the next bucket's
//      start (the last bucket's: where its all-reduce wait was), so each reduction overlaps the
//      backward that produces the next bucket, and a full bucket lives only until then: what
//      stays is the [s] shard of the reduced gradient. A bucket larger than the bucket size
//      (one gradient over the cap, e.g. an embedding's) is waited for right after its start,
//      so what is in flight beside the bucket being filled never exceeds one cap.
//   3. The bucket's parameter updates (adamw_step / sgd_step, one per parameter) become one
//      adamw_shard_step / sgd_shard_step over the shard (ir/ops_shard.cpp), reading the full
//      reduced gradients (stage 1) or the reduced shard (stage 2), whose result is the updated
//      shard; then all_gather_params writes every rank's shard back into the parameters.
//   With norm clipping under stage 2 no rank holds every gradient: global_norm of the local
//   shards is squared, all-reduced (bucket -2) and square-rooted to the global norm.
//   Collective numbering: the reduce-scatters keep their buckets' seq; the norm's all-reduce
//   and then the all-gathers, bucket by bucket, follow the largest seq before them.
//
// Invariants: every parameter is written exactly once per step, by its bucket's
// all_gather_params, after every other use of it (the scheduler's in-place ordering: it is the
// last node in program order touching it); each rank's state holds exactly its shard, s
// elements per state tensor and bucket on every rank; stage 0 and world 1 leave the graph
// unchanged. The updated values equal the replicated update's element by element (same
// arithmetic, ir/ops_shard.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/data_parallel.h"
#include "passes/pass.h"

namespace gradc::passes {

Status shardOptimizerState(ir::Graph& graph, const DataParallelOptions& options);

class ShardStatePass final : public Pass {
 public:
  explicit ShardStatePass(DataParallelOptions options) : options_(options) {}
  std::string_view name() const override { return "shard-state"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  DataParallelOptions options_;
};

// The ZeRO stage a graph was built with: Replicated when it has no sharded update, Parameters
// when it gathers parameters.
ZeroStage shardStageOf(const ir::Graph& graph);

// Bytes one rank sends per step, by collective, for ring algorithms over N ranks: an all-reduce
// of B bytes sends 2 (N-1)/N B, a reduce-scatter or all-gather of B bytes (N s elements) sends
// (N-1)/N B; a gather's other ranks send their rows to the root, a scatter's root sends the
// other ranks theirs.
struct CommunicationVolume {
  std::int64_t allReduceBytes = 0;
  std::int64_t reduceScatterBytes = 0;
  std::int64_t allGatherBytes = 0;
  std::int64_t otherBytes = 0;  // gather, scatter and their halves
  std::int64_t total() const { return allReduceBytes + reduceScatterBytes + allGatherBytes + otherBytes; }
};
CommunicationVolume communicationVolume(const ir::Graph& graph);

}  // namespace gradc::passes
