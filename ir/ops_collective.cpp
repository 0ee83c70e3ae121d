// Collective ops of the op table: the communication of data-parallel training, created by the
// data-parallel pass (passes/data_parallel.h). Conventions as in ir/ops.cpp.
//
// Every collective carries `seq`, its position in the order in which the ranks issue their
// collectives: every rank must issue them in the same order, so the scheduler keeps the
// issuing nodes (all_reduce_start, gather, gather_send, scatter, scatter_recv) in seq order
// and the executor runs them in schedule order. `world` is the number of ranks and `root` the
// rank that holds gathered data; `group` the axis of the device mesh whose ranks take part
// (ir/device_mesh.h: `world` is its extent, `rank` and `root` positions along it). All collectives are marked sideEffects: no pass removes or
// duplicates (recomputes) them.
//
// Memory model (the planner's and the runtime's):
//  - all_reduce_start copies its operands into one fresh flat buffer (the bucket) and starts an
//    in-place sum over the ranks on it; the bucket is its result. The operands may die right
//    after it, as a gradient dies once it is in its bucket.
//  - all_reduce_wait waits for that sum and returns the parts of the bucket as views with the
//    original shapes; the bucket stays alive while any part does (until the last optimizer
//    update that reads one).
//  - gather / scatter and their non-root halves are blocking and return fresh tensors; the rows
//    move straight between the root's tensor and the other ranks' (no workspace).
//  - reduce_scatter_start (ZeRO stage 2, passes/shard_state.h) copies its operands into one
//    fresh flat bucket padded with zeros to world x s elements (s = the shard size,
//    ir/shard_layout.h) and starts the sum whose block `rank` this rank keeps;
//    reduce_scatter_wait waits for it and copies that block into its fresh [s] result, so the
//    bucket dies at the wait and only the shard lives on to the optimizer update.
//  - all_gather_params (ZeRO stages 1 and 2) is blocking: every rank's updated shard [s] goes
//    into a world x s workspace, from which the parameters (its other operands, written in
//    place) are copied back; it has no results.
//  - all_gather_start (ZeRO stage 3, passes/shard_params.h) copies this rank's parameter shard
//    [s] into block `rank` of its fresh world x s result and starts gathering the other ranks'
//    blocks into it; all_gather_wait waits and returns the bucket's parameters as views of the
//    buffer's first elements (the padding past them is never read), so the gathered
//    parameters live exactly while some reader of them does.
#include <string>

#include "ir/op_rules.h"
#include "ir/shard_layout.h"

namespace gradc::ir {
namespace {
using namespace rules;

using Types = std::span<const TensorType>;

Status checkWorld(const OpContext& c) {
  std::int64_t world = *getInt(c.attrs, "world");
  if (world < 1) return Error{"world must be at least 1, got " + std::to_string(world)};
  if (std::optional<std::int64_t> root = getInt(c.attrs, "root"); root && (*root < 0 || *root >= world))
    return Error{"root " + std::to_string(*root) + " is not a rank of a world of " + std::to_string(world)};
  if (*getInt(c.attrs, "seq") < 0) return Error{"seq must not be negative"};
  return {};
}

Results inferAllReduceStart(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s.error();
  const DType dtype = c.inputs[0].dtype;
  std::int64_t total = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (Status s = requireFloat(c.inputs[i], "operand " + std::to_string(i)); !s) return s.error();
    if (c.inputs[i].dtype != dtype)
      return fail("every operand must have the first one's dtype " + std::string(dtypeName(dtype)) + ", operand " +
                  std::to_string(i) + " is " + typeStr(c.inputs[i]));
    total = saturatingAdd(total, c.inputs[i].numel());
  }
  return single(TensorType{dtype, {total}});
}

// The parts of a bucket (all_reduce_wait, all_gather_wait): `part_ranks` [r0, r1, ...] and
// `part_shapes`, the extents of every part concatenated; their types and total element count.
struct BucketParts {
  std::vector<TensorType> types;
  std::int64_t total = 0;
};
Expected<BucketParts> bucketParts(const OpContext& c, DType dtype) {
  const std::vector<std::int64_t> ranks = *getIntList(c.attrs, "part_ranks");
  const std::vector<std::int64_t> extents = *getIntList(c.attrs, "part_shapes");
  if (ranks.empty()) return Error{"part_ranks is empty: a bucket holds at least one tensor"};
  BucketParts parts;
  size_t at = 0;
  for (std::int64_t r : ranks) {
    if (r < 0 || at + static_cast<size_t>(r) > extents.size())
      return Error{"part_ranks " + shapeToString(ranks) + " does not match part_shapes " + shapeToString(extents)};
    Shape shape(extents.begin() + static_cast<std::ptrdiff_t>(at), extents.begin() + static_cast<std::ptrdiff_t>(at + r));
    at += static_cast<size_t>(r);
    std::optional<std::int64_t> n = checkedNumel(shape);
    if (!n) return Error{"part shape " + shapeToString(shape) + " is not a valid shape"};
    parts.total = saturatingAdd(parts.total, *n);
    parts.types.push_back(TensorType{dtype, shape});
  }
  if (at != extents.size())
    return Error{"part_shapes " + shapeToString(extents) + " has extents beyond part_ranks " + shapeToString(ranks)};
  return parts;
}

Results inferAllReduceWait(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s.error();
  const TensorType& bucket = c.inputs[0];
  if (bucket.rank() != 1) return fail("the bucket must be a flat (rank 1) tensor, got " + typeStr(bucket));
  Expected<BucketParts> parts = bucketParts(c, bucket.dtype);
  if (!parts) return parts.error();
  if (parts->total != bucket.shape[0])
    return fail("the parts hold " + std::to_string(parts->total) + " elements, the bucket " + std::to_string(bucket.shape[0]));
  return parts->types;
}

Results inferGather(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s.error();
  const std::int64_t world = *getInt(c.attrs, "world");
  std::vector<TensorType> out;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].rank() == 0) return fail("operand " + std::to_string(i) + " is a scalar; gather needs a leading axis");
    TensorType t = c.inputs[i];
    t.shape[0] = saturatingMul(t.shape[0], world);
    out.push_back(t);
  }
  return out;
}

Results inferGatherSend(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s.error();
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].rank() == 0) return fail("operand " + std::to_string(i) + " is a scalar; gather needs a leading axis");
  return single(TensorType{*getDType(c.attrs, "dtype"), {}});
}

Results inferScatter(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s.error();
  const std::int64_t world = *getInt(c.attrs, "world");
  TensorType t = c.inputs[0];
  if (t.rank() == 0 || t.shape[0] % world != 0)
    return fail("cannot scatter " + typeStr(t) + " over " + std::to_string(world) +
                " ranks: its leading extent must be a multiple of the world size");
  t.shape[0] /= world;
  return single(t);
}

Results inferScatterRecv(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s.error();
  if (c.inputs[0].rank() != 0) return fail("the operand orders the receive after the loss; it must be a scalar");
  Shape shape = *getIntList(c.attrs, "shape");
  if (!checkedNumel(shape) || shape.empty()) return fail("shape " + shapeToString(shape) + " is not a valid shape");
  return single(TensorType{*getDType(c.attrs, "dtype"), shape});
}

// The rank of a sharded collective, checked against its world.
Status checkRank(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return s;
  const std::int64_t rank = *getInt(c.attrs, "rank"), world = *getInt(c.attrs, "world");
  if (rank < 0 || rank >= world) return Error{"rank " + std::to_string(rank) + " is not a rank of a world of " + std::to_string(world)};
  return {};
}

// The element count of float operands [first, last) of one dtype.
Expected<std::int64_t> bucketElements(const OpContext& c, size_t first, size_t last) {
  std::int64_t total = 0;
  for (size_t i = first; i < last; ++i) {
    if (Status s = requireFloat(c.inputs[i], "operand " + std::to_string(i)); !s) return s.error();
    if (c.inputs[i].dtype != c.inputs[first].dtype)
      return Error{"every operand must have the first one's dtype " + std::string(dtypeName(c.inputs[first].dtype)) +
                   ", operand " + std::to_string(i) + " is " + typeStr(c.inputs[i])};
    total = saturatingAdd(total, c.inputs[i].numel());
  }
  return total;
}

Results inferReduceScatterStart(const OpContext& c) {
  if (Status s = checkRank(c); !s) return s.error();
  Expected<std::int64_t> total = bucketElements(c, 0, c.inputs.size());
  if (!total) return total.error();
  const std::int64_t world = *getInt(c.attrs, "world");
  return single(TensorType{c.inputs[0].dtype, {saturatingMul(world, shardSize(*total, world))}});
}

Results inferReduceScatterWait(const OpContext& c) {
  if (Status s = checkRank(c); !s) return s.error();
  const TensorType& bucket = c.inputs[0];
  const std::int64_t world = *getInt(c.attrs, "world");
  if (bucket.rank() != 1 || bucket.shape[0] % world != 0)
    return fail("the bucket must be flat with a multiple of " + std::to_string(world) + " elements, got " +
                typeStr(bucket));
  return single(TensorType{bucket.dtype, {bucket.shape[0] / world}});
}

Results inferAllGatherParams(const OpContext& c) {
  if (Status s = checkRank(c); !s) return s.error();
  if (c.inputs.size() < 2) return fail("needs the parameters and the shard");
  Expected<std::int64_t> total = bucketElements(c, 0, c.inputs.size() - 1);
  if (!total) return total.error();
  const TensorType& shard = c.inputs.back();
  const std::int64_t world = *getInt(c.attrs, "world");
  if (shard.rank() != 1 || shard.dtype != c.inputs[0].dtype || shard.shape[0] != shardSize(*total, world))
    return fail("the shard must be " + std::string(dtypeName(c.inputs[0].dtype)) + "[" +
                std::to_string(shardSize(*total, world)) + "] (the parameters hold " + std::to_string(*total) +
                " elements over " + std::to_string(world) + " ranks), got " + typeStr(shard));
  return std::vector<TensorType>{};
}

Results inferAllGatherStart(const OpContext& c) {
  if (Status s = checkRank(c); !s) return s.error();
  const TensorType& shard = c.inputs[0];
  if (Status s = requireFloat(shard, "the shard"); !s) return s.error();
  if (shard.rank() != 1) return fail("the shard must be a flat (rank 1) tensor, got " + typeStr(shard));
  return single(TensorType{shard.dtype, {saturatingMul(*getInt(c.attrs, "world"), shard.shape[0])}});
}

// The parameters' shapes as all_reduce_wait's parts; they shard into the gathered buffer.
Results inferAllGatherWait(const OpContext& c) {
  if (Status s = checkRank(c); !s) return s.error();
  const TensorType& buffer = c.inputs[0];
  const std::int64_t world = *getInt(c.attrs, "world");
  if (buffer.rank() != 1 || buffer.shape[0] % world != 0)
    return fail("the gathered buffer must be flat with a multiple of " + std::to_string(world) + " elements, got " +
                typeStr(buffer));
  Expected<BucketParts> parts = bucketParts(c, buffer.dtype);
  if (!parts) return parts.error();
  if (shardSize(parts->total, world) * world != buffer.shape[0])
    return fail("the parts hold " + std::to_string(parts->total) + " elements, which " + std::to_string(world) +
                " ranks shard into " + std::to_string(shardSize(parts->total, world) * world) + ", the buffer holds " +
                std::to_string(buffer.shape[0]));
  return parts->types;
}

// The gathered shards of every rank, before they are copied into the parameters.
std::int64_t workspaceAllGatherParams(const OpContext& c, Types) {
  return saturatingMul(*getInt(c.attrs, "world"), c.inputs.back().bytes());
}

// Reduction arithmetic of one rank in a ring all-reduce: about 2 (world-1)/world adds per
// element; counted as one per element.
std::int64_t flopsAllReduce(const OpContext& c, Types) {
  std::int64_t n = 0;
  for (const TensorType& t : c.inputs) n = saturatingAdd(n, t.numel());
  return n;
}

}  // namespace

std::vector<OpInfo> collectiveOps() {
  const AttrSpec world{"world", AttrKind::Int, true, "number of ranks"};
  const AttrSpec seq{"seq", AttrKind::Int, true, "position in the order every rank issues its collectives"};
  const AttrSpec root{"root", AttrKind::Int, true, "the rank that holds the gathered tensor"};
  const AttrSpec bucket{"bucket", AttrKind::Int, false, "bucket number, for messages"};
  const AttrSpec group{"group", AttrKind::String, false,
                       "the device-mesh axis whose ranks take part (ir/device_mesh.h; default dp)"};
  const AttrSpec rank{"rank", AttrKind::Int, true, "this rank: whose shard it keeps"};
  return {
      {.name = "all_reduce_start", .minInputs = 1, .maxInputs = kVariadic, .attrs = {world, seq, bucket, group},
       .infer = inferAllReduceStart, .flops = flopsAllReduce, .sideEffects = true, .issuesCollective = true,
       .stridedReads = StridedReads::InPlace, .collective = Collective::AllReduceStart,
       .summary = "copies the operands into one flat bucket and starts its in-place sum over all ranks"},
      {.name = "all_reduce_wait", .minInputs = 1, .maxInputs = 1,
       .attrs = {world, seq, bucket, group,
                 {"part_ranks", AttrKind::IntList, true, "rank of each part"},
                 {"part_shapes", AttrKind::IntList, true, "extents of every part, concatenated"}},
       .infer = inferAllReduceWait, .flops = noFlops, .sideEffects = true, .view = true,
       .viewLayout = ViewLayout::BucketParts, .collective = Collective::AllReduceWait,
       .summary = "waits for the bucket's sum; results are views of its parts with their shapes"},
      {.name = "gather", .minInputs = 1, .maxInputs = kVariadic, .attrs = {world, root, seq, group}, .infer = inferGather,
       .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .collective = Collective::Gather,
       .summary = "on the root rank: every rank's operands joined along axis 0 in rank order"},
      {.name = "gather_send", .minInputs = 1, .maxInputs = kVariadic,
       .attrs = {world, root, seq, group, {"dtype", AttrKind::DType, true, "the loss's element type (of the result)"}},
       .infer = inferGatherSend, .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .collective = Collective::GatherSend,
       .summary = "on the other ranks: sends the operands to the root's gather; result 0 of the loss's dtype"},
      {.name = "scatter", .minInputs = 1, .maxInputs = 1, .attrs = {world, root, seq, group}, .infer = inferScatter,
       .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .collective = Collective::Scatter,
       .summary = "on the root rank: rows [r n, (r+1) n) of x go to rank r; the result is the root's rows"},
      {.name = "scatter_recv", .minInputs = 1, .maxInputs = 1,
       .attrs = {world, root, seq, group, {"shape", AttrKind::IntList, true, "extents of the received rows"},
                 {"dtype", AttrKind::DType, true, "element type"}},
       .infer = inferScatterRecv, .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .stridedReads = StridedReads::InPlace, .collective = Collective::ScatterRecv,
       .summary = "on the other ranks: receives this rank's rows of the root's scatter; operand orders it"},
      {.name = "reduce_scatter_start", .minInputs = 1, .maxInputs = kVariadic, .attrs = {world, rank, seq, bucket, group},
       .infer = inferReduceScatterStart, .flops = flopsAllReduce, .sideEffects = true, .issuesCollective = true,
       .stridedReads = StridedReads::InPlace, .collective = Collective::ReduceScatterStart,
       .summary = "copies the operands into one flat bucket padded to world x shard and starts its sum over all "
                  "ranks, of which this rank keeps block `rank`"},
      {.name = "reduce_scatter_wait", .minInputs = 1, .maxInputs = 1, .attrs = {world, rank, seq, bucket, group},
       .infer = inferReduceScatterWait, .flops = noFlops, .sideEffects = true,
       .collective = Collective::ReduceScatterWait,
       .summary = "waits for the bucket's sum; the result is this rank's block of it (a fresh [shard] tensor)"},
      {.name = "all_gather_params", .minInputs = 2, .maxInputs = kVariadic, .attrs = {world, rank, seq, bucket, group},
       .infer = inferAllGatherParams, .flops = noFlops, .workspaceBytes = workspaceAllGatherParams,
       .sideEffects = true, .issuesCollective = true, .stridedReads = StridedReads::InPlace,
       .collective = Collective::AllGatherParams,
       .summary = "(params..., shard): every rank's updated shard gathered and copied into the parameters, in place"},
      {.name = "all_gather_start", .minInputs = 1, .maxInputs = 1, .attrs = {world, rank, seq, bucket, group},
       .infer = inferAllGatherStart, .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .stridedReads = StridedReads::InPlace, .collective = Collective::AllGatherStart,
       .summary = "(shard): this rank's parameter shard into block `rank` of a fresh world x shard buffer, and the "
                  "gathering of the other ranks' blocks started"},
      {.name = "all_gather_wait", .minInputs = 1, .maxInputs = 1,
       .attrs = {world, rank, seq, bucket, group,
                 {"part_ranks", AttrKind::IntList, true, "rank of each parameter"},
                 {"part_shapes", AttrKind::IntList, true, "extents of every parameter, concatenated"},
                 {"kept", AttrKind::Bool, false,
                  "the bucket is kept: this gather serves the backward and recompute too (not gathered again)"}},
       .infer = inferAllGatherWait, .flops = noFlops, .sideEffects = true, .view = true,
       .viewLayout = ViewLayout::BucketParts, .collective = Collective::AllGatherWait,
       .summary = "waits for the gathered buffer; results are views of the bucket's parameters with their shapes"},
  };
}

}  // namespace gradc::ir
