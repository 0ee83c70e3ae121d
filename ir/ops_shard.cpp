// Sharded optimizer updates of the op table (ZeRO stages 1 and 2, passes/shard_state.h): one
// update per gradient bucket that touches only this rank's shard of the bucket's parameters
// (ir/shard_layout.h). Conventions as in ir/ops.cpp.
//
// Operands: the bucket's parameters p_1..p_m (read, never written: all_gather_params writes
// them), the reduced gradient, the shard's optimizer state, then the per-step scalars:
//   adamw_shard_step(p..., grad..., m, v, lr, step, grad_scale)
//   sgd_shard_step(p..., grad..., lr, grad_scale[, momentum_buf])
// where grad... is either every parameter's full reduced gradient (grad_shard = false: stage 1,
// after an all-reduce) or the reduced shard itself, [shard] (grad_shard = true: stage 2, after
// a reduce-scatter). The state tensors are [shard]. The result, [shard], holds the updated
// parameters of the shard (zeros past the bucket's end), for all_gather_params. The state is
// updated in place.
//
// Stage 3 (param_shard = true, passes/shard_params.h): the rank holds only its shard of the
// parameters, so the one parameter operand is that [shard] tensor itself, updated in place
// like the state, and there is no result; part_numels gives the bucket's parameters' element
// counts (the segments), and the gradient operand is the reduced shard.
//
// The arithmetic is adamw_step's and sgd_step's, element by element, so a sharded run follows
// the replicated one. The kernels run it segment by segment (a shard's stretch inside one
// parameter), so the temporaries of the op-by-op path are those of the longest segment.
#include <string>

#include "ir/op_rules.h"
#include "ir/shard_layout.h"

namespace gradc::ir {
namespace {
using namespace rules;

using Types = std::span<const TensorType>;

struct ShardOperands {
  std::int64_t parts = 0;
  size_t gradOperands = 0;  // parts, or 1 for a shard
  size_t stateAt = 0;       // index of the first state operand
};

bool paramShard(const OpContext& c) { return getBool(c.attrs, "param_shard").value_or(false); }

Expected<ShardOperands> shardOperands(const OpContext& c, size_t states, size_t scalars) {
  const std::int64_t parts = *getInt(c.attrs, "parts");
  const bool gradShard = getBool(c.attrs, "grad_shard").value_or(false);
  if (parts < 1) return Error{"parts must be at least 1, got " + std::to_string(parts)};
  if (paramShard(c)) {
    const std::vector<std::int64_t> numels = getIntList(c.attrs, "part_numels").value_or(std::vector<std::int64_t>{});
    if (!gradShard) return Error{"param_shard needs grad_shard: stage 3 reads the reduced gradient shard"};
    if (numels.size() != static_cast<size_t>(parts))
      return Error{"param_shard needs part_numels with one element count per part (" + std::to_string(parts) + ")"};
    for (std::int64_t n : numels)
      if (n < 1) return Error{"part_numels must be positive, got " + shapeToString(numels)};
  }
  const size_t m = paramShard(c) ? 1 : static_cast<size_t>(parts), grads = gradShard ? 1 : m;
  if (c.inputs.size() != m + grads + states + scalars)
    return Error{"expected " + std::to_string(m + grads + states + scalars) + " operands (" + std::to_string(m) +
                 " parameters, " + std::to_string(grads) + " gradient" + (grads == 1 ? "" : "s") + ", " +
                 std::to_string(states) + " state, " + std::to_string(scalars) + " scalars), got " +
                 std::to_string(c.inputs.size())};
  return ShardOperands{parts, grads, m + grads};
}

Status checkScalar(const TensorType& t, std::string_view what, bool floating) {
  if (t.rank() != 0 || isFloating(t.dtype) != floating)
    return Error{std::string(what) + " must be a" + (floating ? " float" : "n integer") + " scalar, got " + typeStr(t)};
  return {};
}

// Parameters, gradients and state; the result type.
Results inferShard(const OpContext& c, const ShardOperands& o, size_t states) {
  const std::int64_t shard = *getInt(c.attrs, "shard"), offset = *getInt(c.attrs, "offset");
  if (shard < 1 || offset < 0) return fail("need shard >= 1 and offset >= 0, got " + std::to_string(shard) + " and " +
                                           std::to_string(offset));
  const DType dtype = c.inputs[0].dtype;
  const TensorType shardType{dtype, {shard}};
  if (paramShard(c)) {
    if (Status s = requireFloat(c.inputs[0], "the parameter shard"); !s) return s.error();
    if (c.inputs[0] != shardType) return fail("the parameter shard must be " + typeStr(shardType) + ", got " + typeStr(c.inputs[0]));
    if (c.inputs[1] != shardType) return fail("the gradient shard must be " + typeStr(shardType) + ", got " + typeStr(c.inputs[1]));
    for (size_t k = 0; k < states; ++k)
      if (c.inputs[o.stateAt + k] != shardType)
        return fail("optimizer state " + std::to_string(k) + " must be " + typeStr(shardType) + ", got " +
                    typeStr(c.inputs[o.stateAt + k]));
    return std::vector<TensorType>{};
  }
  for (std::int64_t i = 0; i < o.parts; ++i) {
    const TensorType& p = c.inputs[static_cast<size_t>(i)];
    if (Status s = requireFloat(p, "parameter " + std::to_string(i)); !s) return s.error();
    if (p.dtype != dtype) return fail("every parameter must be " + std::string(dtypeName(dtype)) + ", parameter " +
                                      std::to_string(i) + " is " + typeStr(p));
  }
  const size_t m = static_cast<size_t>(o.parts);
  for (size_t g = 0; g < o.gradOperands; ++g) {
    const bool gradShard = getBool(c.attrs, "grad_shard").value_or(false);
    const TensorType& want = gradShard ? shardType : c.inputs[g];
    if (c.inputs[m + g] != want)
      return fail("gradient " + std::to_string(g) + " must be " + typeStr(want) + ", got " + typeStr(c.inputs[m + g]));
  }
  for (size_t k = 0; k < states; ++k)
    if (c.inputs[o.stateAt + k] != shardType)
      return fail("optimizer state " + std::to_string(k) + " must be " + typeStr(shardType) + ", got " +
                  typeStr(c.inputs[o.stateAt + k]));
  return single(shardType);
}

Results inferAdamwShardStep(const OpContext& c) {
  Expected<ShardOperands> o = shardOperands(c, 2, 3);
  if (!o) return o.error();
  const size_t at = o->stateAt + 2;
  if (Status s = checkScalar(c.inputs[at], "the learning rate", true); !s) return s.error();
  if (Status s = checkScalar(c.inputs[at + 1], "the step", false); !s) return s.error();
  if (Status s = checkScalar(c.inputs[at + 2], "the gradient scale", true); !s) return s.error();
  return inferShard(c, *o, 2);
}

Results inferSgdShardStep(const OpContext& c) {
  const bool momentum = *getFloat(c.attrs, "momentum") != 0.0;
  Expected<ShardOperands> o = shardOperands(c, momentum ? 1 : 0, 2);
  if (!o) return o.error();
  const size_t at = o->stateAt;  // SGD's state comes last, as in sgd_step
  if (Status s = checkScalar(c.inputs[at], "the learning rate", true); !s) return s.error();
  if (Status s = checkScalar(c.inputs[at + 1], "the gradient scale", true); !s) return s.error();
  ShardOperands shifted = *o;
  shifted.stateAt = at + 2;
  return inferShard(c, shifted, momentum ? 1 : 0);
}

// Element counts of the parameters.
std::vector<std::int64_t> partNumels(const OpContext& c) {
  if (paramShard(c)) return *getIntList(c.attrs, "part_numels");
  std::vector<std::int64_t> n;
  for (std::int64_t i = 0; i < *getInt(c.attrs, "parts"); ++i) n.push_back(c.inputs[static_cast<size_t>(i)].numel());
  return n;
}

std::int64_t longestSegmentBytes(const OpContext& c) {
  const std::vector<std::int64_t> n = partNumels(c);
  return saturatingMul(longestSegment(n, *getInt(c.attrs, "offset"), *getInt(c.attrs, "shard")),
                       dtypeSize(c.inputs[0].dtype));
}

// As adamw_step's, for the longest segment: sqrt(v) and a wrapped Scalar (none when fused).
// A shard past the bucket's end (small buckets, last ranks) has no segment and runs nothing.
std::int64_t workspaceAdamwShardStep(const OpContext& c, Types) {
  if (getBool(c.attrs, "fused").value_or(false) || longestSegmentBytes(c) == 0) return 0;
  return longestSegmentBytes(c) + scalarOperandBytes(c.inputs[0].dtype);
}

// As sgd_step's, for the longest segment: gradient plus weight decay, the momentum's Scalar.
std::int64_t workspaceSgdShardStep(const OpContext& c, Types) {
  const bool decay = getFloat(c.attrs, "weight_decay").value_or(0) != 0;
  const bool momentum = getFloat(c.attrs, "momentum").value_or(0) != 0;
  if (longestSegmentBytes(c) == 0) return 0;
  return (decay ? longestSegmentBytes(c) : 0) + (momentum ? scalarOperandBytes(c.inputs[0].dtype) : 0);
}

Results inferNormFromSquares(const OpContext& c) {
  if (c.inputs[0] != TensorType{DType::f32, {}}) return fail("the sum of squares must be f32[], got " + typeStr(c.inputs[0]));
  return single(TensorType{DType::f32, {}});
}

std::int64_t flopsAdamwShardStep(const OpContext& c, Types) { return 12 * *getInt(c.attrs, "shard"); }
std::int64_t flopsSgdShardStep(const OpContext& c, Types) { return 4 * *getInt(c.attrs, "shard"); }

}  // namespace

std::vector<OpInfo> shardOps() {
  const AttrSpec parts{"parts", AttrKind::Int, true, "number of parameters in the bucket (the first operands)"};
  const AttrSpec offset{"offset", AttrKind::Int, true, "the shard's first element in the bucket"};
  const AttrSpec shard{"shard", AttrKind::Int, true, "elements of every rank's shard"};
  const AttrSpec noDecayParts{"no_decay_parts", AttrKind::IntList, false,
                              "parts updated without weight decay (a decay group that leaves them off)"};
  const AttrSpec gradShard{"grad_shard", AttrKind::Bool, false,
                           "the gradient operand is the reduced shard (stage 2), not every full gradient"};
  const AttrSpec paramShardAttr{"param_shard", AttrKind::Bool, false,
                                "stage 3: the parameter operand is this rank's [shard] of the bucket, updated in place"};
  const AttrSpec partNumelsAttr{"part_numels", AttrKind::IntList, false,
                                "stage 3: element counts of the bucket's parameters, in bucket order"};
  return {
      {.name = "adamw_shard_step", .minInputs = 6, .maxInputs = kVariadic,
       .attrs = {parts, offset, shard, gradShard, paramShardAttr, partNumelsAttr,
                 {"beta1", AttrKind::Float, true, "first-moment decay"},
                 {"beta2", AttrKind::Float, true, "second-moment decay"},
                 {"eps", AttrKind::Float, true, "added to the root of the second moment"},
                 {"weight_decay", AttrKind::Float, true, "decoupled decay, scaled by lr"},
                 noDecayParts,
                 {"fused", AttrKind::Bool, false, "one pass per segment (set by the fuse pass)"}},
       .infer = inferAdamwShardStep, .flops = flopsAdamwShardStep, .workspaceBytes = workspaceAdamwShardStep,
       .sideEffects = true, .stridedReads = StridedReads::InPlace,
       .role = OpRole::ShardedOptimizerUpdate,
       .summary = "(params..., grad..., m, v, lr, step, grad_scale): AdamW on this rank's shard; result: the "
                  "updated shard"},
      {.name = "sgd_shard_step", .minInputs = 4, .maxInputs = kVariadic,
       .attrs = {parts, offset, shard, gradShard, paramShardAttr, partNumelsAttr,
                 {"momentum", AttrKind::Float, true, "0 for plain SGD"},
                 {"weight_decay", AttrKind::Float, true, "L2 penalty added to the gradient"},
                 noDecayParts},
       .infer = inferSgdShardStep, .flops = flopsSgdShardStep, .workspaceBytes = workspaceSgdShardStep,
       .sideEffects = true, .stridedReads = StridedReads::InPlace,
       .role = OpRole::ShardedOptimizerUpdate,
       .summary = "(params..., grad..., lr, grad_scale[, momentum_buf]): SGD on this rank's shard; result: the "
                  "updated shard"},
      {.name = "norm_from_squares", .minInputs = 1, .maxInputs = 1, .infer = inferNormFromSquares,
       .flops = noFlops, .stridedReads = StridedReads::InPlace,
       .summary = "the global gradient norm: sqrt of the all-reduced sum of the ranks' squared shard norms"},
  };
}

}  // namespace gradc::ir
