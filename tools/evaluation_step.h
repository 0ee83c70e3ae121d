// The evaluation step compiled beside the training step (`gradc compile`, `gradc train`): the
// model's forward in evaluation mode (dropout off, batch norm with its running statistics),
// its loss the only output, for a rank's rows of a validation batch, scheduled and planned
// inside the training step's arena (passes/evaluation_plan.h), under the same budget.
//
// Under ZeRO stage 3 it reads the training step's parameter shards, gathered bucket by bucket
// as the training forward gathers them (passes/shard_params.h: gatherShardsForEvaluation), so
// every rank runs it at once, as it does anyway (the loss is averaged over the ranks).
//
// When the whole rank batch does not fit the budget beside the persistent state, the rows are
// evaluated in `splits` equal parts, one run each (the smallest split count that fits; the loss
// of a batch is the mean of the parts' means, as every part has the same rows).
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/evaluation_plan.h"
#include "tools/training_step.h"

namespace gradc::tools {

// Dropout off, batch norm in inference mode, dead code removed, and with `fuseAttention` the
// attention cores as fused attention nodes (passes/fuse_attention.h, never holding the
// [S, S_kv] scores): what `gradc eval`, `gradc sample` and the evaluation step run.
Status prepareInference(ir::Graph& graph, bool fuseAttention);

struct EvaluationStep {
  ir::Graph graph;  // scheduled; inputs of rows / splits examples, output "loss"
  passes::EvaluationPlan plan;
  int splits = 1;  // runs per rank batch
};

// The evaluation step of `forward` (the spec's graph, the global batch) for each of `world`
// ranks beside `step`, its attention fused when `step`'s is (passes/fuse_attention.h); an Error says why there is none (no loss, a batch that cannot be split,
// no split count that fits the budget).
Expected<EvaluationStep> buildEvaluationStep(const ir::Graph& forward, const TrainingStep& step, int world);

}  // namespace gradc::tools
