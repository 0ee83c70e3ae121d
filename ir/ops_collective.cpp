// Collective ops of the op table: the communication of data-parallel training, created by the
// data-parallel pass (passes/data_parallel.h). Conventions as in ir/ops.cpp.
//
// Every collective carries `seq`, its position in the order in which the ranks issue their
// collectives: every rank must issue them in the same order, so the scheduler keeps the
// issuing nodes (all_reduce_start, gather, gather_send, scatter, scatter_recv) in seq order
// and the executor runs them in schedule order. `world` is the number of ranks and `root` the
// rank that holds gathered data. All collectives are marked sideEffects: no pass removes or
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
#include <string>

#include "ir/op_rules.h"

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
  if (Status s = checkWorld(c); !s) return Error{s.message()};
  const DType dtype = c.inputs[0].dtype;
  std::int64_t total = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (Status s = requireFloat(c.inputs[i], "operand " + std::to_string(i)); !s) return Error{s.message()};
    if (c.inputs[i].dtype != dtype)
      return fail("every operand must have the first one's dtype " + std::string(dtypeName(dtype)) + ", operand " +
                  std::to_string(i) + " is " + typeStr(c.inputs[i]));
    total = saturatingAdd(total, c.inputs[i].numel());
  }
  return single(TensorType{dtype, {total}});
}

// The shapes of all_reduce_wait's parts: `part_ranks` [r0, r1, ...] and `part_shapes`, the
// extents of every part concatenated.
Results inferAllReduceWait(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return Error{s.message()};
  const TensorType& bucket = c.inputs[0];
  if (bucket.rank() != 1) return fail("the bucket must be a flat (rank 1) tensor, got " + typeStr(bucket));
  std::vector<std::int64_t> ranks = *getIntList(c.attrs, "part_ranks");
  std::vector<std::int64_t> extents = *getIntList(c.attrs, "part_shapes");
  if (ranks.empty()) return fail("part_ranks is empty: a bucket holds at least one tensor");
  std::vector<TensorType> parts;
  size_t at = 0;
  std::int64_t total = 0;
  for (std::int64_t r : ranks) {
    if (r < 0 || at + static_cast<size_t>(r) > extents.size())
      return fail("part_ranks " + shapeToString(ranks) + " does not match part_shapes " + shapeToString(extents));
    Shape shape(extents.begin() + static_cast<std::ptrdiff_t>(at), extents.begin() + static_cast<std::ptrdiff_t>(at + r));
    at += static_cast<size_t>(r);
    std::optional<std::int64_t> n = checkedNumel(shape);
    if (!n) return fail("part shape " + shapeToString(shape) + " is not a valid shape");
    total = saturatingAdd(total, *n);
    parts.push_back(TensorType{bucket.dtype, shape});
  }
  if (at != extents.size())
    return fail("part_shapes " + shapeToString(extents) + " has extents beyond part_ranks " + shapeToString(ranks));
  if (total != bucket.shape[0])
    return fail("the parts hold " + std::to_string(total) + " elements, the bucket " + std::to_string(bucket.shape[0]));
  return parts;
}

Results inferGather(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return Error{s.message()};
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
  if (Status s = checkWorld(c); !s) return Error{s.message()};
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].rank() == 0) return fail("operand " + std::to_string(i) + " is a scalar; gather needs a leading axis");
  return single(TensorType{*getDType(c.attrs, "dtype"), {}});
}

Results inferScatter(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return Error{s.message()};
  const std::int64_t world = *getInt(c.attrs, "world");
  TensorType t = c.inputs[0];
  if (t.rank() == 0 || t.shape[0] % world != 0)
    return fail("cannot scatter " + typeStr(t) + " over " + std::to_string(world) +
                " ranks: its leading extent must be a multiple of the world size");
  t.shape[0] /= world;
  return single(t);
}

Results inferScatterRecv(const OpContext& c) {
  if (Status s = checkWorld(c); !s) return Error{s.message()};
  if (c.inputs[0].rank() != 0) return fail("the operand orders the receive after the loss; it must be a scalar");
  Shape shape = *getIntList(c.attrs, "shape");
  if (!checkedNumel(shape) || shape.empty()) return fail("shape " + shapeToString(shape) + " is not a valid shape");
  return single(TensorType{*getDType(c.attrs, "dtype"), shape});
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
  return {
      {.name = "all_reduce_start", .minInputs = 1, .maxInputs = kVariadic, .attrs = {world, seq, bucket},
       .infer = inferAllReduceStart, .flops = flopsAllReduce, .sideEffects = true, .issuesCollective = true,
       .stridedReads = StridedReads::InPlace, .collective = Collective::AllReduceStart,
       .summary = "copies the operands into one flat bucket and starts its in-place sum over all ranks"},
      {.name = "all_reduce_wait", .minInputs = 1, .maxInputs = 1,
       .attrs = {world, seq, bucket,
                 {"part_ranks", AttrKind::IntList, true, "rank of each part"},
                 {"part_shapes", AttrKind::IntList, true, "extents of every part, concatenated"}},
       .infer = inferAllReduceWait, .flops = noFlops, .sideEffects = true, .view = true,
       .viewLayout = ViewLayout::BucketParts, .collective = Collective::AllReduceWait,
       .summary = "waits for the bucket's sum; results are views of its parts with their shapes"},
      {.name = "gather", .minInputs = 1, .maxInputs = kVariadic, .attrs = {world, root, seq}, .infer = inferGather,
       .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .collective = Collective::Gather,
       .summary = "on the root rank: every rank's operands joined along axis 0 in rank order"},
      {.name = "gather_send", .minInputs = 1, .maxInputs = kVariadic,
       .attrs = {world, root, seq, {"dtype", AttrKind::DType, true, "the loss's element type (of the result)"}},
       .infer = inferGatherSend, .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .collective = Collective::GatherSend,
       .summary = "on the other ranks: sends the operands to the root's gather; result 0 of the loss's dtype"},
      {.name = "scatter", .minInputs = 1, .maxInputs = 1, .attrs = {world, root, seq}, .infer = inferScatter,
       .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .collective = Collective::Scatter,
       .summary = "on the root rank: rows [r n, (r+1) n) of x go to rank r; the result is the root's rows"},
      {.name = "scatter_recv", .minInputs = 1, .maxInputs = 1,
       .attrs = {world, root, seq, {"shape", AttrKind::IntList, true, "extents of the received rows"},
                 {"dtype", AttrKind::DType, true, "element type"}},
       .infer = inferScatterRecv, .flops = noFlops, .sideEffects = true, .issuesCollective = true,
       .stridedReads = StridedReads::InPlace, .collective = Collective::ScatterRecv,
       .summary = "on the other ranks: receives this rank's rows of the root's scatter; operand orders it"},
  };
}

}  // namespace gradc::ir
