// Micro-batching (gradient accumulation).
//
// microBatchedGradients(forward, k) replaces the autodiff pass: from a forward graph whose
// inputs share a leading batch extent B (k divides B) it builds one joint graph that computes
// the full-batch loss and gradients as k sequential micro-batches of B/k examples:
//   1. The forward is re-typed for B/k examples: inputs get leading extent B/k; a `shape`
//      attribute whose node reads a batch-carrying value (reshape) has its first extent
//      divided by k, and a constant's (zeros) leading extent B becomes B/k; every type is
//      inferred again, so anything that does not fit is an Error naming the node. A node with
//      a `dim`/`dim0`/`dim1` attribute of 0 on a batch-carrying operand (it would mix examples)
//      is an Error too.
//   2. Autodiff differentiates that micro graph once.
//   3. For j = 0..k-1 its nodes are copied in: inputs become slice(x){dim 0, j*B/k .. (j+1)*B/k},
//      micro-batch j's forward then its backward, so only one micro-batch's activations are
//      alive at a time. Random nodes (dropout, forward and backward alike) get rng + j * S,
//      where S = 1 + the largest rng key of the forward graph: every micro-batch draws its
//      own masks, reproducibly, and recomputation still redraws the same ones.
//   4. Accumulation: sum_j loss_j and sum_j grad_j (add, in micro-batch order, right after
//      each micro-batch), then loss = scale(sum, 1/k) and grad.<p> = scale(sum, 1/k).
// Outputs: "loss" and "grad.<p>" for every parameter in order, as autodiff's. Each micro
// loss is a mean over equal parts of the batch, so the result is the full-batch mean loss and
// its gradient up to float summation order (with dropout the masks differ from the full-batch
// ones). k = 1 is exactly autodiff on a copy.
//
// The training-step planner (passes/plan/training_planner.h) chooses the count together with
// the recompute plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace gradc::passes {

inline constexpr int kMaxAutoMicroBatches = 64;

// The common leading extent of the graph's inputs.
Expected<std::int64_t> batchSize(const ir::Graph& forward);

// Step 1 above on its own: `forward` (batch B) re-typed for B/k examples. `purpose` starts
// every error message ("micro-batching", "data parallelism").
Expected<ir::Graph> rebatchForward(const ir::Graph& forward, std::int64_t batch, int k, std::string_view purpose);

Expected<ir::Graph> microBatchedGradients(const ir::Graph& forward, int k);
// The same, taking `forward` over: with k = 1 its nodes become the joint graph's (no copy).
Expected<ir::Graph> microBatchedGradients(ir::Graph&& forward, int k);

// The first node that works along the batch axis of a batched value (a reduction over it,
// softmax or concat along it: it mixes examples), whose result a split batch would change;
// nullptr when there is none or the batch cannot be split.
const ir::Node* batchMixingNode(const ir::Graph& forward);

// Whether splitting the batch keeps the step's results: no batch statistics
// (OpInfo::batchStatistics) and no node that mixes examples (batchMixingNode).
bool batchSplitsExactly(const ir::Graph& forward);

// What `--micro-batches auto` tries: the divisors of the batch up to kMaxAutoMicroBatches; only 1
// for a graph with batch statistics (OpInfo::batchStatistics) or a node that mixes examples
// (batchMixingNode), whose results a split would change.
std::vector<int> microBatchCandidates(const ir::Graph& forward);

}  // namespace gradc::passes
