// ZeRO stage 3 (Rajbhandari et al., SC 2020; PyTorch's FSDP): the parameters sharded over the
// data-parallel ranks as the optimizer state and gradients are under stage 2, gathered just in
// time for the nodes that read them.
//
// shardParameters(graph, options) runs at the end of shardOptimizerState (passes/shard_state.h)
// on a graph it has made stage 2 (reduce-scatters, one sharded update per gradient bucket, each
// followed by all_gather_params). A gradient bucket is a parameter group: its parameters are
// gathered together, in the flat padded layout of ir/shard_layout.h. For every bucket k:
//   1. The rank keeps its [s] shard of the bucket's parameters as one parameter,
//      param.bucket<k> (attributes shard_of, shard_prefix "", shard_offset, shard_world as the
//      state shards have, so checkpoints hold the replicated parameters, runtime/
//      shard_checkpoint.h; shard_part_ranks / shard_part_shapes, the parameters' shapes; init
//      "shard" with shard_init, each parameter's initialiser, so that a rank initialises its
//      shard as the replicated run initialises the parameters). The replicated parameters
//      leave the graph; the bucket's optimizer-state shards get the part shapes too.
//   2. The readers of the bucket's parameters, in program order, are cut into segments: a new
//      segment where the readers pass from the forward (phase fwd) to the rest (backward,
//      recompute) or back (the next micro-batch), except for a kept bucket (options.keepGathered:
//      the last groups the forward gathers), whose readers form one segment. Each segment gets
//      all_gather_start (the shard into a fresh world x s buffer, the gathering started) and
//      all_gather_wait (the parameters as views of it; attribute `kept` for a kept bucket)
//      right before its first reader, whose parameter operands it replaces; the buffer lives while a reader of its views does, so a
//      forward's gathered parameters are freed after their last forward use unless kept. A
//      gather inside the forward takes phase fwd (else comm), so that the recompute planner
//      still sees one forward run (passes/remat.h); its buffer counts as communication.
//   3. Prefetch (options.prefetch): segment i's all_gather_start moves before the first reader
//      of segment i - 1 (in the order of first readers), so the next group's gathering overlaps
//      this group's compute, forward and backward alike, at the cost of one more group's buffer.
//   4. The bucket's sharded update takes the parameter shard as its parameter operand
//      (param_shard, ir/ops_shard.cpp) and updates it in place; all_gather_params goes.
//   5. Collectives are numbered again (seq) in program order, every wait with its start's.
//
// Recompute (remat, after this pass): a recomputed node reads parameters its original read
// from a forward gather. For a kept bucket it reads the forward's views (alive anyway); for a
// gathered-again one the recompute plan gathers the bucket again right before the recomputed
// nodes (remat::regatherForRecompute, passes/remat_strategies.h), so the forward buffer still
// dies after its last forward use. The graph attribute prefetch_gathers (options.prefetch)
// tells the recompute plan whether to start those gathers one group ahead too.
//
// Invariants: no node reads a replicated parameter of a bucket; every reader of a gathered
// parameter runs after its segment's wait (program order; the data edge); each rank's
// parameter state is exactly its s elements per bucket; the update is the last node touching
// the shard; every rank's graph has the same collectives in the same seq order.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/data_parallel.h"

namespace gradc::passes {

// The graph attribute (bool) recording options.prefetch on a graph this pass sharded.
inline constexpr std::string_view kPrefetchGathersAttr = "prefetch_gathers";

Status shardParameters(ir::Graph& graph, const DataParallelOptions& options);

// The evaluation step (a forward-only graph that reads the replicated parameters) beside a
// stage 3 training step `step`: each bucket's parameters become the step's parameter shard
// (same name, type and attributes, so the evaluation reads it where the step keeps it),
// gathered right before its first reader and freed after its last (one segment per bucket,
// started one bucket ahead when the step prefetches). The same gathers and invariants as
// steps 2, 3 and 5 above; nothing is kept, nothing updated. A graph without shards is unchanged.
Status gatherShardsForEvaluation(ir::Graph& eval, const ir::Graph& step);

// How many parameter groups a stage 3 step's forward gathers (what options.keepGathered counts).
int forwardGatheredGroups(const ir::Graph& graph);

// What a stage 3 step gathers, for people: "the last 4 of 32 buckets kept from the forward,
// 28 gathered again for the backward, 12 gathers again for recompute".
std::string describeGathers(const ir::Graph& graph);

}  // namespace gradc::passes
