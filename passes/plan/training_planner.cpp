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
  options.remat = RematStrategy::None;
  options.plan = PlanOptions{};  // no budget: one configuration
  Expected<ConfigSpace> space = configSpace(forward, options);
  if (!space) return space.error();
  const PlanConfig config{space->microBatches.front(), space->zeroStages.front(), 0, space->keepGathered.front()};
  if (space->unfused) return buildConfiguredStep(forward, consumable, config, options);
  return buildConfiguredStep(*space->fusedForward, nullptr, config, options);
}

}  // namespace

Expected<TrainingPlan> chooseTrainingPlan(const ir::Graph& forward, const TrainingPlanOptions& options,
                                          bool recordStages) {
  Expected<ConfigSpace> space = configSpace(forward, options, recordStages);
  if (!space) return space.error();
  const std::vector<int>& ks = space->microBatches;
  const std::vector<ZeroStage>& stages = space->zeroStages;
  const LossChunking& chunking = options.lossChunks;

  struct Built {
    ir::Graph graph;
    PlanConfig config;
    std::vector<int> lossChunks;  // the chunk counts to choose from (empty: as built)
    std::vector<RecordedStage> stages;
  };
  std::vector<Built> graphs;
  graphs.reserve(2 * ks.size() * stages.size());
  auto select = [&]() -> Expected<TrainingPlan> {
    std::vector<PlanCandidate> views;
    for (Built& b : graphs) views.push_back(PlanCandidate{&b.graph, b.config, b.lossChunks});
    Expected<PlanSelection> s = selectTrainingPlan(views, options.remat, options.plan);
    if (!s) return s.error();
    Built& chosen = graphs[s->graph];
    PlanDecision decision{std::move(s->rewrite), s->structure, s->report};
    return TrainingPlan{std::move(chosen.graph), std::move(s->report), std::move(chosen.stages), std::move(decision)};
  };
  auto build = [&](const PlanConfig& config) -> Expected<Built> {
    Built b{ir::Graph(forward.name()), config, {}, {}};
    if (config.fusedLoss() && recordStages) b.stages = space->fusedForwardStages;
    const ir::Graph& from = config.fusedLoss() ? *space->fusedForward : forward;
    Expected<ir::Graph> g = buildConfiguredStep(from, nullptr, config, options, recordStages ? &b.stages : nullptr);
    if (!g) return g.error();
    if (Status s = verifyTrainingStep(*g); !s) return s.error();
    b.graph = std::move(*g);
    b.config.lossChunks = lossChunksOf(b.graph);
    return b;
  };
  // Under least-recompute every plan without recompute comes first, by micro-batch count (then
  // unfused before fused); with none, auto and chain one exists for every count (the step as it
  // is). So while counts are built smallest first (each unfused, then fused), the first graph
  // whose step fits as it is (a fused one at its finest chunking) is the choice, and larger
  // counts (whose graphs grow with the count) need not be built at all.
  const RematStrategy strategy = options.remat;
  const bool keepFirst = options.plan.budgetBytes && options.plan.objective.firstFitEndsSearch() &&
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
    for (ZeroStage stage : stages)
      for (size_t i = 0; i < (stage == ZeroStage::Parameters ? keeps.size() : 1); ++i) {
        if (stage == ZeroStage::Parameters && i == 1 && !keepsKnown) {
          keepsKnown = true;
          std::vector<int> between;
          for (int kept = forwardGatheredGroups(graphs.back().graph) / 2; kept >= 1; kept /= 2) between.push_back(kept);
          keeps.insert(keeps.begin() + 1, between.begin(), between.end());
        }
        const int keep = stage == ZeroStage::Parameters ? keeps[i] : 0;
        if (space->unfused) {
          Expected<Built> b = build(PlanConfig{k, stage, 0, keep});
          if (!b) return b.error();
          graphs.push_back(std::move(*b));
          if (keepFirst && several && scheduledPeakBytes(graphs.back().graph) <= options.plan.planBudget())
            return select();
        }
        if (space->fused) {
          Expected<Built> b = build(PlanConfig{k, stage, lossChunksOf(*space->fusedForward), keep});
          if (!b) return b.error();
          if (chunking.mode == LossChunking::Mode::Auto) b->lossChunks = lossChunkCandidates(b->graph);
          graphs.push_back(std::move(*b));
          if (keepFirst && several) {
            // At its finest chunking (the selection sets the count of every proposal it measures).
            Built& last = graphs.back();
            if (!last.lossChunks.empty()) setLossChunks(last.graph, last.lossChunks.back());
            if (scheduledPeakBytes(last.graph) <= options.plan.planBudget()) return select();
          }
        }
      }
  return select();
}

Expected<std::optional<TrainingPlan>> applyPlanDecision(const ir::Graph& forward, const PlanDecision& decided,
                                                        const TrainingPlanOptions& options, bool recordStages) {
  std::vector<RecordedStage> stages;
  std::optional<ir::Graph> fused;
  const PlanConfig& config = decided.config();
  if (config.fusedLoss()) {
    Expected<ir::Graph> f = fusedLossForward(forward, config.lossChunks, recordStages ? &stages : nullptr);
    if (!f) return f.error();
    fused = std::move(*f);
  }
  Expected<ir::Graph> g = buildConfiguredStep(fused ? *fused : forward, nullptr, config, options,
                                              recordStages ? &stages : nullptr);
  if (!g) return g.error();
  if (Status s = verifyTrainingStep(*g); !s) return s.error();
  if (remat::structureOf(*g) != decided.structure) return std::optional<TrainingPlan>();
  Expected<RewritePlan> rewrite = remat::bindRewrite(decided.rewrite, *g);
  if (!rewrite) return rewrite.error();
  remat::applyRewrite(*g, *rewrite);
  if (config.fusedLoss()) setLossChunks(*g, config.lossChunks);
  return std::optional<TrainingPlan>(TrainingPlan{std::move(*g), decided.report, std::move(stages), decided});
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

  TrainingStepResult result{std::move(chosen->graph), std::move(chosen->report), {}, std::move(chosen->decision),
                            appliedDecision};
  pm.add<Schedule>();
  pm.add<MemoryPlanPass>(&result.plan);
  if (Expected<bool> ran = pm.run(result.graph); !ran) return ran.error();
  if (appliedDecision) {
    // This rank's own peak (its shards' update workspaces may differ from the deciding rank's).
    result.report.predictedPeakBytes = result.plan.peakBytes;
    result.report.savedBytes = result.report.peakWithoutRematBytes - result.plan.peakBytes;
  } else if (result.plan.peakBytes != result.report.predictedPeakBytes)
    // The search judged every proposal on its scheduled peak: the plan emitted must be that peak.
    return internalError("training planner", "the memory plan's peak (" + std::to_string(result.plan.peakBytes) +
                                                 " bytes) differs from the scheduled peak the search chose on (" +
                                                 std::to_string(result.report.predictedPeakBytes) + " bytes)");
  result.plan.strategy = std::string(rematStrategyName(result.report.chosen));
  result.plan.budgetBytes = options.plan.budgetBytes;
  result.plan.reserveBytes = options.plan.reserveBytes;
  return result;
}

}  // namespace gradc::passes
