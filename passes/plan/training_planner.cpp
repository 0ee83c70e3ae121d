#include "passes/plan/training_planner.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "ir/verifier.h"
#include "passes/fuse_loss.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "passes/remat_strategies.h"
#include "passes/rewrite_by_ids.h"
#include "passes/schedule.h"
#include "passes/shard_params.h"

namespace gradc::passes {

namespace {

// The step as it is (trainingStepAsIs); with `consumable` (== &forward), taking it over.
Expected<ir::Graph> stepAsIs(const ir::Graph& forward, ir::Graph* consumable, TrainingPlanOptions options) {
  options.remat = RematOptions{};  // no budget: one configuration
  Expected<ConfigSpace> space = configSpace(forward, options);
  if (!space) return space.error();
  const StepConfig config{space->microBatches.front(), space->shardStages.front(), !space->unfused,
                          space->keepGathered.front()};
  if (space->unfused) return buildConfiguredStep(forward, consumable, config, options);
  return buildConfiguredStep(*space->fusedForward, nullptr, config, options);
}

}  // namespace

Expected<TrainingPlan> chooseTrainingPlan(const ir::Graph& forward, const TrainingPlanOptions& options,
                                          bool recordStages) {
  Expected<ConfigSpace> space = configSpace(forward, options, recordStages);
  if (!space) return space.error();
  const std::vector<int>& ks = space->microBatches;
  const std::vector<int>& stages = space->shardStages;
  const LossChunking& chunking = options.lossChunks;

  struct Built {
    ir::Graph graph;
    int microBatches;
    std::vector<int> lossChunks;
    int shardStage = 0;
    std::vector<RecordedStage> stages;
    int keepGathered = 0;
  };
  std::vector<Built> graphs;
  graphs.reserve(2 * ks.size() * stages.size());
  auto select = [&]() -> Expected<TrainingPlan> {
    std::vector<PlanCandidate> views;
    for (Built& b : graphs)
      views.push_back(PlanCandidate{&b.graph, b.microBatches, b.lossChunks, b.shardStage, b.keepGathered});
    Expected<PlanSelection> s = selectTrainingPlan(views, options.remat);
    if (!s) return s.error();
    Built& chosen = graphs[s->graph];
    const int lossChunks = lossChunksOf(chosen.graph);
    PlanDecision decision{StepConfig{chosen.microBatches, chosen.shardStage, lossChunks > 0, chosen.keepGathered}, lossChunks,
                          std::move(s->rewrite), s->structure, s->report};
    return TrainingPlan{std::move(chosen.graph), std::move(s->report), chosen.microBatches, lossChunks,
                        chosen.shardStage, std::move(chosen.stages), std::move(decision)};
  };
  auto build = [&](const StepConfig& config) -> Expected<Built> {
    Built b{ir::Graph(forward.name()), config.microBatches, {}, config.shardStage, {}, config.keepGathered};
    if (config.fusedLoss && recordStages) b.stages = space->fusedForwardStages;
    const ir::Graph& from = config.fusedLoss ? *space->fusedForward : forward;
    Expected<ir::Graph> g = buildConfiguredStep(from, nullptr, config, options, recordStages ? &b.stages : nullptr);
    if (!g) return g.error();
    if (Status s = verifyTrainingStep(*g); !s) return s.error();
    b.graph = std::move(*g);
    return b;
  };
  // Under least-recompute every plan without recompute comes first, by micro-batch count (then
  // unfused before fused); with none, auto and chain one exists for every count (the step as it
  // is). So while counts are built smallest first (each unfused, then fused), the first graph
  // whose step fits as it is (a fused one at its finest chunking) is the choice, and larger
  // counts (whose graphs grow with the count) need not be built at all.
  const RematStrategy strategy = options.remat.strategy;
  const bool keepFirst = options.remat.budgetBytes && options.remat.objective.firstFitEndsSearch() &&
                         (strategy == RematStrategy::Auto || strategy == RematStrategy::None ||
                          strategy == RematStrategy::Chain);
  const bool several = ks.size() > 1 || stages.size() > 1 || space->keepGathered.size() > 1 ||
                       (space->unfused && space->fused);
  // Stage 3's kept groups, in the order tried; with keepGatheredBetween, the counts between
  // all and none join once the first stage 3 step (every group kept) says how many groups the
  // forward gathers.
  std::vector<int> keeps = space->keepGathered;
  bool keepsKnown = !space->keepGatheredBetween;
  for (int k : ks)
    for (int stage : stages)
      for (size_t i = 0; i < (stage == 3 ? keeps.size() : 1); ++i) {
        if (stage == 3 && i == 1 && !keepsKnown) {
          keepsKnown = true;
          std::vector<int> between;
          for (int kept = forwardGatheredGroups(graphs.back().graph) / 2; kept >= 1; kept /= 2) between.push_back(kept);
          keeps.insert(keeps.begin() + 1, between.begin(), between.end());
        }
        const int keep = stage == 3 ? keeps[i] : 0;
        if (space->unfused) {
          Expected<Built> b = build(StepConfig{k, stage, false, keep});
          if (!b) return b.error();
          graphs.push_back(std::move(*b));
          if (keepFirst && several && scheduledPeakBytes(graphs.back().graph) <= options.remat.planBudget())
            return select();
        }
        if (space->fused) {
          Expected<Built> b = build(StepConfig{k, stage, true, keep});
          if (!b) return b.error();
          if (chunking.mode == LossChunking::Mode::Auto) b->lossChunks = lossChunkCandidates(b->graph);
          graphs.push_back(std::move(*b));
          if (keepFirst && several) {
            // At its finest chunking (the selection sets the count of every proposal it measures).
            Built& last = graphs.back();
            if (!last.lossChunks.empty()) setLossChunks(last.graph, last.lossChunks.back());
            if (scheduledPeakBytes(last.graph) <= options.remat.planBudget()) return select();
          }
        }
      }
  return select();
}

Expected<std::optional<TrainingPlan>> applyPlanDecision(const ir::Graph& forward, const PlanDecision& decided,
                                                        const TrainingPlanOptions& options, bool recordStages) {
  std::vector<RecordedStage> stages;
  std::optional<ir::Graph> fused;
  if (decided.config.fusedLoss) {
    Expected<ir::Graph> f = fusedLossForward(forward, std::max(decided.lossChunks, 1), recordStages ? &stages : nullptr);
    if (!f) return f.error();
    fused = std::move(*f);
  }
  Expected<ir::Graph> g = buildConfiguredStep(fused ? *fused : forward, nullptr, decided.config, options,
                                              recordStages ? &stages : nullptr);
  if (!g) return g.error();
  if (Status s = verifyTrainingStep(*g); !s) return s.error();
  if (remat::structureOf(*g) != decided.structure) return std::optional<TrainingPlan>();
  Expected<RewritePlan> rewrite = remat::bindRewrite(decided.rewrite, *g);
  if (!rewrite) return rewrite.error();
  remat::applyRewrite(*g, *rewrite);
  if (decided.lossChunks > 0) setLossChunks(*g, decided.lossChunks);
  return std::optional<TrainingPlan>(TrainingPlan{std::move(*g), decided.report, decided.config.microBatches,
                                                  decided.lossChunks, decided.config.shardStage, std::move(stages),
                                                  decided});
}

Expected<ir::Graph> trainingStepAsIs(const ir::Graph& forward, const TrainingPlanOptions& options) {
  return stepAsIs(forward, nullptr, options);
}

Expected<ir::Graph> trainingStepAsIs(ir::Graph&& forward, const TrainingPlanOptions& options) {
  return stepAsIs(forward, &forward, options);
}

Status verifyTrainingStep(const ir::Graph& step) {
  if (Status s = ir::verify(step); !s)
    return Error{"verifier failed on the training step: " + s.message(), ErrorKind::Internal};
  return {};
}

Expected<bool> MemoryPlanPass::run(ir::Graph& graph) {
  *out_ = planMemory(graph);
  return false;
}

Expected<TrainingStepResult> buildTrainingStepPipeline(const ir::Graph& forward, const ir::Graph* shard,
                                                       const TrainingPlanOptions& options,
                                                       const PassManagerOptions& pmOptions,
                                                       const PlanDecision* decided) {
  const bool parallel = options.dataParallel && options.dataParallel->communicates();
  std::optional<ir::Graph> partitioned;
  if (parallel && !shard) {
    Expected<ir::Graph> p = partitionForward(forward, *options.dataParallel);
    if (!p) return p.error();
    partitioned = std::move(*p);
    shard = &*partitioned;
  }
  PassManager pm(pmOptions);
  if (Status s = pm.show(forward, "input"); !s) return s.error();
  if (parallel)
    if (Status s = pm.show(*shard, "partition"); !s) return s.error();

  const ir::Graph& rankForward = parallel ? *shard : forward;
  std::optional<TrainingPlan> applied;
  if (decided) {
    Expected<std::optional<TrainingPlan>> a = applyPlanDecision(rankForward, *decided, options, pmOptions.showsStages());
    if (!a) return a.error();
    applied = std::move(*a);
  }
  const bool appliedDecision = applied.has_value();
  Expected<TrainingPlan> chosen = applied ? Expected<TrainingPlan>(std::move(*applied))
                                          : chooseTrainingPlan(rankForward, options, pmOptions.showsStages());
  if (!chosen) return chosen.error();
  partitioned.reset();
  if (Status s = pm.show(chosen->stages); !s) return s.error();
  if (Status s = pm.show(chosen->graph, "remat", chosen->report.recomputeNodes > 0); !s) return s.error();
  // The search verified each configuration it built; remat's rewrite is verified here.
  if (Status s = ir::verify(chosen->graph); !s)
    return Error{"verifier failed after pass 'remat': " + s.message(), ErrorKind::Internal};

  TrainingStepResult result{std::move(chosen->graph), std::move(chosen->report), {}, chosen->microBatches,
                            chosen->lossChunks, chosen->shardStage, std::move(chosen->decision), appliedDecision};
  pm.add<Schedule>();
  pm.add<MemoryPlanPass>(&result.plan);
  if (Expected<bool> ran = pm.run(result.graph); !ran) return ran.error();
  if (appliedDecision) {
    // This rank's own peak (its shards' update workspaces may differ from the deciding rank's).
    result.remat.predictedPeakBytes = result.plan.peakBytes;
    result.remat.savedBytes = result.remat.peakWithoutRematBytes - result.plan.peakBytes;
  } else if (result.plan.peakBytes != result.remat.predictedPeakBytes)
    // The search judged every proposal on its scheduled peak: the plan emitted must be that peak.
    return internalError("training planner", "the memory plan's peak (" + std::to_string(result.plan.peakBytes) +
                                                 " bytes) differs from the scheduled peak the search chose on (" +
                                                 std::to_string(result.remat.predictedPeakBytes) + " bytes)");
  result.plan.strategy = std::string(rematStrategyName(result.remat.chosen));
  result.plan.budgetBytes = options.remat.budgetBytes;
  result.plan.reserveBytes = options.remat.reserveBytes;
  return result;
}

}  // namespace gradc::passes
