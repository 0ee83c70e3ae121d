#include "tools/evaluation_step.h"

#include <fmt/format.h>

#include <algorithm>

#include "passes/batch_norm_inference.h"
#include "passes/budget.h"
#include "passes/dce.h"
#include "passes/fuse_attention.h"
#include "passes/micro_batch.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "passes/shard_params.h"
#include "passes/strip_dropout.h"

namespace gradc::tools {

Status prepareInference(ir::Graph& graph, bool fuseAttention) {
  passes::PassManager pm;
  pm.add<passes::StripDropout>().add<passes::BatchNormInference>().add<passes::DeadCodeElimination>();
  if (Expected<bool> r = pm.run(graph); !r) return r.error();
  if (fuseAttention)
    if (Expected<int> n = passes::fuseAttention(graph); !n) return n.error();
  return {};
}

Expected<EvaluationStep> buildEvaluationStep(const ir::Graph& forward, const TrainingStep& step, int world) {
  if (!forward.findOutput("loss")) return Error{"the model has no `loss` output"};
  Expected<std::int64_t> batch = passes::batchSize(forward);
  if (!batch) return batch.error();
  if (*batch % world != 0) return Error{"the batch does not split over the ranks"};
  // Inference mode first, on the whole batch: batch statistics are gone before the rows split.
  Expected<ir::Graph> whole = passes::rebatchForward(forward, *batch, 1, "evaluation");
  if (!whole) return whole.error();
  whole->removeOutputsIf([](const ir::GraphOutput& o) { return o.name != "loss"; });
  // Attention as the training step runs it: fused there (the default), fused here, so an
  // evaluation never holds the [S, S_kv] scores a long context's training step does without.
  const bool fusedAttention = std::any_of(step.graph.nodes().begin(), step.graph.nodes().end(), [](const auto& n) {
    return n->op().role == ir::OpRole::FusedAttention;
  });
  if (Status s = prepareInference(*whole, fusedAttention); !s) return s.error();

  const std::int64_t rows = *batch / world;
  std::string last;
  for (std::int64_t splits = 1; splits <= rows && splits <= passes::kMaxAutoMicroBatches; ++splits) {
    if (rows % splits != 0) continue;
    Expected<ir::Graph> g = passes::rebatchForward(*whole, *batch, static_cast<int>(world * splits), "evaluation");
    if (!g) return g.error();
    // Under ZeRO stage 3 the rank holds only its shard of each bucket: gathered for the readers.
    if (Status s = passes::gatherShardsForEvaluation(*g, step.graph); !s) return s.error();
    passes::PassManager pm;
    pm.add<passes::Schedule>();
    if (Expected<bool> r = pm.run(*g); !r) return r.error();
    Expected<passes::EvaluationPlan> plan = passes::planEvaluationInside(*g, step.plan);
    if (!plan) return plan.error();
    const std::int64_t need = plan->plan.peakBytes + step.plan.reserveBytes;
    if (!step.plan.budgetBytes || need <= *step.plan.budgetBytes)
      return EvaluationStep{std::move(*g), std::move(*plan), static_cast<int>(splits)};
    last = fmt::format("at {} rows per run it needs {} beside the training state, over the budget of {}",
                       rows / splits, passes::formatBytes(need), passes::formatBytes(*step.plan.budgetBytes));
  }
  return Error{"no evaluation step fits: " + last};
}

}  // namespace gradc::tools
