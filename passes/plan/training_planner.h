// The training-step planner: chooses how a step is built -- micro-batch count, ZeRO stage,
// fused-loss chunks and recompute plan -- for a byte budget and an objective, then emits the
// step it chose.
//
// Search (chooseTrainingPlan): every configuration of the request's space
// (passes/plan/step_pipeline.h) is built once with the one pipeline definition, unverified, then
// verified once; selectTrainingPlan (passes/plan/plan_selection.h) measures the recompute proposals of all of
// them together and applies the objective's choice (passes/plan/objective.h) to its graph. Built
// in the objective's order (micro-batch count, then stage, then unfused before fused), so under
// least-recompute the first configuration whose step fits as it is ends the search.
//
// Emission (buildTrainingStepPipeline): the graph the search chose -- not a rebuild -- is
// verified, scheduled and memory-planned under a PassManager, and the stages that made it
// (recorded during the search when --print-after-all or --dump-dir look) are shown before:
//
//   input -> [partition] -> [fuse-loss] -> micro-batch -> [collectives] -> optimizer
//   -> [shard-state] -> dce -> [fuse] -> remat -> schedule -> memory-plan
//
// Invariant checked: the memory plan's peak is the scheduled peak the search chose on.
//
// Ranks: one rank's search decides for every data-parallel rank (PlanDecision); each other rank
// builds that configuration from its own shard and applies the same rewrite, when its graph has
// the deciding rank's structure (passes/rewrite_by_ids.h), and searches only when it does not.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "passes/memory/memory_plan.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/plan/step_pipeline.h"
#include "passes/remat.h"

namespace gradc::passes {

// What a search decided, in a form another data-parallel rank applies to its own graph instead
// of searching again (decided once for all ranks): the recompute rewrite in ids, with the
// structure of the graph it was decided on (passes/rewrite_by_ids.h), and the deciding rank's
// report, whose configuration (with the fused loss's chunks) the other rank builds.
struct PlanDecision {
  remat::RewriteByIds rewrite;
  std::uint64_t structure = 0;
  TrainingPlanReport report;

  const PlanConfig& config() const { return report.config; }
};

// The search's choice: the step with its recompute plan applied (not yet scheduled).
struct TrainingPlan {
  ir::Graph graph;
  TrainingPlanReport report;  // with the chosen configuration (report.config)
  std::vector<RecordedStage> stages;  // when recorded: the stages that built `graph`, before remat
  PlanDecision decision;
};

// forward graph (one rank's shard under data parallelism) -> the chosen joint graph of one
// training step. With `recordStages`, TrainingPlan::stages holds the chosen graph's stages.
Expected<TrainingPlan> chooseTrainingPlan(const ir::Graph& forward, const TrainingPlanOptions& options,
                                          bool recordStages = false);

// `decided` applied to `forward` (another rank's shard, built the same way): its configuration
// built with the pipeline definition and verified, then its rewrite and chunk count applied.
// nullopt when this rank's graph is not built like the deciding rank's (structureOf differs:
// under --loss-placement gather only rank 0 computes the loss); the caller searches then.
Expected<std::optional<TrainingPlan>> applyPlanDecision(const ir::Graph& forward, const PlanDecision& decided,
                                                        const TrainingPlanOptions& options, bool recordStages = false);

// The step chooseTrainingPlan chooses when nothing is recomputed and there is no budget to fit
// (`options.remat` and `options.plan` are ignored; auto micro-batches and ZeRO stage are 1 and 0, an auto fused
// loss is not fused), built without measuring it and NOT verified: the caller runs
// verifyTrainingStep on it (the summary does while it measures the recompute strategies on it).
Expected<ir::Graph> trainingStepAsIs(const ir::Graph& forward, const TrainingPlanOptions& options);
// The same, taking `forward` over: with one micro-batch its nodes become the step's instead of
// a copy's. For callers done with the forward graph (a summary of a large spec); the graph is
// left empty or unspecified.
Expected<ir::Graph> trainingStepAsIs(ir::Graph&& forward, const TrainingPlanOptions& options);
// ir::verify, its failure named as the training step's (ErrorKind::Internal: the passes broke it).
Status verifyTrainingStep(const ir::Graph& step);

// Plans the scheduled graph's memory into `out`; never changes the graph.
class MemoryPlanPass final : public Pass {
 public:
  explicit MemoryPlanPass(MemoryPlan* out) : out_(out) {}
  std::string_view name() const override { return "memory-plan"; }
  Expected<bool> run(ir::Graph& graph) override;

 private:
  MemoryPlan* out_;
};

struct TrainingStepResult {
  ir::Graph graph;  // scheduled
  TrainingPlanReport report;  // this rank's: its configuration (report.config), recompute and peak
  MemoryPlan plan;
  PlanDecision decision;  // what was decided (or applied), for the other ranks
  // Built from another rank's decision: the plan's peak is this rank's own, which the deciding
  // rank's search did not measure; the caller checks it against the budget.
  bool appliedDecision = false;
};

// Searches (chooseTrainingPlan) -- or, given `decided` and a graph built like the deciding
// rank's, applies that decision (applyPlanDecision) -- then emits the chosen step as described
// above, under a PassManager with `pm` (verification, printing, dumps). With
// options.dataParallel set for a world > 1, `shard` is this rank's partition of `forward`
// (partitionForward), or null to have it partitioned here. The plan's strategy and budget are
// filled in.
Expected<TrainingStepResult> buildTrainingStepPipeline(const ir::Graph& forward, const ir::Graph* shard,
                                                       const TrainingPlanOptions& options,
                                                       const PassManagerOptions& pm = {},
                                                       const PlanDecision* decided = nullptr);
inline Expected<TrainingStepResult> buildTrainingStepPipeline(const ir::Graph& forward,
                                                              const TrainingPlanOptions& options,
                                                              const PassManagerOptions& pm = {}) {
  return buildTrainingStepPipeline(forward, nullptr, options, pm);
}

}  // namespace gradc::passes
