// The op table: every IR op is declared exactly once, in ir/ops.cpp, as an OpInfo entry.
//
// An entry carries everything the rest of the compiler derives from the op: arity, attribute
// schema, shape/dtype inference, FLOP count, kernel workspace bytes and flags. Passes ask the
// table; they never switch over op names. Adding an op = one entry here (+ its runtime kernel
// binding + its gradient rule + tests).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/status.h"
#include "ir/tensor_type.h"

namespace gradc::ir {

class Node;
class Value;

inline constexpr int kVariadic = -1;

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
  std::string_view doc;
};

class KernelTarget;  // ir/kernel_target.h: a backend's description

// What a plan sizes kernel workspaces for: intra-op threads and the backend whose kernels run it
// (a graph's kernelSetting()). An int converts to that many threads on the default backend.
struct KernelSetting {
  int threads = 1;
  const KernelTarget* target = nullptr;  // nullptr: defaultKernelTarget()
  KernelSetting(int threads = 1, const KernelTarget* target = nullptr)  // NOLINT: implicit from threads
      : threads(threads), target(target) {}
};

// What an op's rules see: operand types and attributes (already checked against the schema).
struct OpContext {
  std::span<const TensorType> inputs;
  const AttrMap& attrs;
  // Intra-op threads the kernel runs with (Graph::kernelThreads); read by workspace rules only.
  int kernelThreads = 1;
};

using InferFn = Expected<std::vector<TensorType>> (*)(const OpContext& ctx);
// Cost rules also see the inferred result types.
using CostFn = std::int64_t (*)(const OpContext& ctx, std::span<const TensorType> results);
// For operands that hold indices (embedding rows, class labels): the exclusive upper bound
// their values must respect, or nullopt for operands that are not indices.
using IndexBoundFn = std::optional<std::int64_t> (*)(const OpContext& ctx, size_t operand);

// How a view op's results get their strides from operand 0's (OpInfo::viewLayout; the memory
// planner's storage model implements each, passes/memory/storage.cpp).
enum class ViewLayout {
  None,         // not a view
  Transpose,    // two axes swapped (attributes dim0, dim1)
  SameStrides,  // same strides, another offset (slice, split)
  DropAxis,     // one axis removed (attribute dim: select, unbind)
  Reshape,      // a view when ATen's stride rule allows one, else the kernel copies
  BucketParts,  // contiguous parts of a flat buffer (all_reduce_wait)
};

// How the op's kernel reads strided operands (OpInfo::stridedReads), for the planner's hidden
// copies (passes/memory/storage.h). Mirrors runtime/kernels/kernels_*.cpp.
enum class StridedReads {
  Copied,   // ATen copies every strided operand to contiguous memory for the call (the default)
  InPlace,  // reads any strides in place (TensorIterator ops, concatenation, reductions, scatters)
  Matmul,   // at::matmul's folding: copies only when the strides allow no view, or BLAS cannot read them
  Rows,     // flattens operands to 2-D rows with a reshape (copies only when no view exists)
};

// The part an op plays in communication between data-parallel ranks (OpInfo::collective).
enum class Collective {
  None,
  AllReduceStart,
  AllReduceWait,
  Gather,
  GatherSend,
  Scatter,
  ScatterRecv,
  ReduceScatterStart,
  ReduceScatterWait,
  AllGatherParams,
  AllGatherStart,  // ZeRO stage 3: a parameter bucket's shards gathered into a fresh buffer
  AllGatherWait,
};

// Roles some passes and tools look ops up by.
enum class OpRole : std::uint8_t {
  None,
  OptimizerUpdate,         // adamw_step, sgd_step: one parameter's update, in place
  ShardedOptimizerUpdate,  // adamw_shard_step, sgd_shard_step: a ZeRO rank's update of its shard
  GradientNorm,            // global_norm: the norm gradient clipping scales by
  RunningStatsUpdate,      // running_stats_update: batch norm's running statistics
  ClassificationLoss,      // cross_entropy
  FusedLinearLoss,         // linear_cross_entropy: an LM head fused into its loss
  FusedRegion,             // fused: a region of elementwise ops as one generated kernel
  LinearLayer,             // linear: x @ W^T (+ b), the LM head a fused loss can absorb
  // The steps of scaled dot-product attention that passes/fuse_attention.h folds into one
  // attention node (FusedAttention):
  MatrixProduct,           // matmul: batched a @ b, broadcasting leading axes
  ConstantScale,           // scale: x * factor
  CausalMask,              // causal_mask: -inf above the diagonal
  Softmax,                 // softmax along `dim`
  FusedAttention,          // attention: the tiled kernel with no [S, S_kv] buffer
};

struct OpInfo {
  std::string_view name;
  int minInputs = 0;
  int maxInputs = 0;  // kVariadic: no upper bound
  std::vector<AttrSpec> attrs;
  InferFn infer = nullptr;
  CostFn flops = nullptr;           // floating-point operations of one execution
  CostFn workspaceBytes = nullptr;  // temporaries the kernel allocates beyond its results; null: 0
  IndexBoundFn indexBound = nullptr;  // null: no operand holds indices
  // result[i] depends only on operand elements at i (broadcast) and on the position i itself
  // (causal_mask): fusable into a generated kernel (passes/fuse.h, codegen/elementwise_ops.h).
  bool elementwise = false;
  bool sideEffects = false;         // never removed by dead-code elimination
  bool random = false;              // draws from the counter-based RNG (attribute "rng" keys it)
  // Results are views of operand 0's storage (no new memory; they keep it alive). The memory
  // planner and the runtime agree on this list.
  bool view = false;
  // Starts communication between data-parallel ranks (ir/ops_collective.cpp). Every rank must
  // issue these in the order of their `seq` attribute; the scheduler keeps that order.
  bool issuesCollective = false;
  ViewLayout viewLayout = ViewLayout::None;  // set exactly for view ops
  StridedReads stridedReads = StridedReads::Copied;
  Collective collective = Collective::None;
  // The identity outside training (dropout): evaluation graphs drop it (passes/strip_dropout.h).
  bool evalIdentity = false;
  // Normalises with statistics over the batch axis (batch_norm): a split batch (micro-batches,
  // data-parallel ranks) computes each shard's own statistics, so splitting changes the
  // result. `auto` micro-batching never splits such a graph; an explicit count does, as
  // gradient accumulation does in PyTorch.
  bool batchStatistics = false;
  // What the op is to the passes and tools that look for it: they compare roles, never names.
  OpRole role = OpRole::None;
  // Optimizer updates (OptimizerUpdate): operands [stateBegin, stateEnd) that the node has are
  // the optimizer state it updates in place (adamw_step's m and v; sgd_step's momentum buffer).
  int stateBegin = 0;
  int stateEnd = 0;
  // Optimizer updates: the op applying the same update to a ZeRO rank's shard of a bucket
  // (ShardedOptimizerUpdate, passes/shard_state.h). Its operands: the bucket's parameters, their
  // gradients (or the reduced gradient shard), then this op's operands after the gradient in
  // this op's order, the state operands replaced by their shards.
  std::string_view shardedForm;
  std::string_view summary;         // one line for docs and error hints
};

// An optimizer update's state operands, in order (OpInfo::stateBegin/stateEnd).
std::vector<Value*> optimizerStateOperands(const Node& update);

// Bytes ATen allocates for one Scalar operand of an elementwise op on `dtype` tensors while it
// runs: the wrapped f64 number, and its cast to `dtype` (none for f64).
std::int64_t scalarOperandBytes(DType dtype);

// linear_cross_entropy{chunks} (ir/ops_fused_loss.cpp) processes its rows this many at a time:
// ceil(rows / chunks); the last chunk may be shorter. The kernel and the declared workspace use it.
std::int64_t linearCrossEntropyChunkRows(std::int64_t rows, std::int64_t chunks);
// nullptr when no op has that name.
const OpInfo* findOp(std::string_view name);
std::span<const OpInfo> allOps();
const AttrSpec* findAttrSpec(const OpInfo& op, std::string_view name);

// Checks attributes against the op's schema (unknown, missing, wrong kind), then runs the
// op's inference rule. The error message names the op and the offending operand or attribute.
Expected<std::vector<TensorType>> inferResultTypes(const OpInfo& op, std::span<const TensorType> inputs,
                                                   const AttrMap& attrs);

std::int64_t opFlops(const OpInfo& op, std::span<const TensorType> inputs, const AttrMap& attrs,
                     std::span<const TensorType> results);
// With the plan's kernel setting (Graph::kernelSetting: intra-op threads and target backend,
// parameters of the plan, which the runtime then runs with): the backend's rule for the op where
// it has one (ir/kernel_target.h), else the op table's.
std::int64_t opWorkspaceBytes(const OpInfo& op, std::span<const TensorType> inputs, const AttrMap& attrs,
                              std::span<const TensorType> results, KernelSetting kernels);
// Bytes read and written by one execution: operands plus results plus workspace.
std::int64_t opBytesAccessed(const OpInfo& op, std::span<const TensorType> inputs, const AttrMap& attrs,
                             std::span<const TensorType> results, KernelSetting kernels);

}  // namespace gradc::ir
