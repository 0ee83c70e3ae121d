// Micro-batching (gradient accumulation) and the training-step planner that chooses the
// micro-batch count together with the remat plan.
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
// chooseTrainingPlan builds micro-batching (or autodiff) -> [data-parallel collectives] ->
// optimizer -> dce for each candidate k, unfused and (under --loss-chunks auto with a budget,
// or forced) with the fused loss of passes/fuse_loss.h, then selectRematPlan picks the
// micro-batch count, the loss chunks and the remat plan together: least recompute FLOPs first
// (micro-batching costs none; the fused loss its recomputed logits), then the smallest k, then
// the fewest chunks. Counts are built smallest first, and with none, auto or chain the building
// stops at the first count whose step fits without recompute (that is the choice the full
// selection would make).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/data_parallel.h"
#include "passes/fuse_loss.h"
#include "passes/optimizer.h"
#include "passes/remat.h"

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

// What `--micro-batches auto` tries: the divisors of the batch up to kMaxAutoMicroBatches; only 1
// for a graph with batch statistics (OpInfo::batchStatistics) or a node that mixes examples
// (batchMixingNode), whose results a split would change.
std::vector<int> microBatchCandidates(const ir::Graph& forward);

struct TrainingPlanOptions {
  std::optional<OptimizerOptions> optimizer = OptimizerOptions{};  // nullopt: gradients as outputs
  // Set for a data-parallel rank: `forward` is already partitioned (partitionForward), and the
  // gradient collectives are inserted before the optimizer (insertCollectives), so the budget
  // and the remat plan see the rank's shapes, buckets and communication buffers.
  std::optional<DataParallelOptions> dataParallel;
  RematOptions remat;
  int microBatches = 1;  // 0: auto (with a budget: microBatchCandidates; without: 1)
  LossChunking lossChunks;  // auto: fused only when that is the cheapest way to fit the budget
  // Elementwise regions become fused nodes (passes/fuse.h) after the optimizer, before remat, so
  // the search plans the fused step.
  bool fuseElementwise = false;
};

struct RematChoice {
  ir::Graph graph;
  RematReport report;
  int microBatches = 1;
  int lossChunks = 0;  // the fused loss's chunks; 0: not fused
  int shardStage = 0;  // ZeRO stage (passes/shard_state.h)
};

// forward graph -> the planned joint graph of one training step.
Expected<RematChoice> chooseTrainingPlan(const ir::Graph& forward, const TrainingPlanOptions& options);

// The step chooseTrainingPlan chooses when nothing is recomputed and there is no budget to fit
// (`options.remat` is ignored; auto micro-batches and ZeRO stage are 1 and 0, an auto fused
// loss is not fused), built without measuring it and NOT verified: the caller runs
// verifyTrainingStep on it (the summary does while it measures the recompute strategies on it).
Expected<ir::Graph> trainingStepAsIs(const ir::Graph& forward, const TrainingPlanOptions& options);
// The same, taking `forward` over: with one micro-batch its nodes become the step's instead of
// a copy's. For callers done with the forward graph (a summary of a large spec); the graph is
// left empty or unspecified.
Expected<ir::Graph> trainingStepAsIs(ir::Graph&& forward, const TrainingPlanOptions& options);
// ir::verify, its failure named as the training step's.
Status verifyTrainingStep(const ir::Graph& step);

}  // namespace gradc::passes
