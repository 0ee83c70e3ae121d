#include "passes/remat.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <numeric>

#include "passes/plan/proposal_set.h"
#include "passes/schedule.h"

namespace gradc::passes {

using search::Measurements;
using search::Proposal;
using search::ProposalGraph;
using search::ProposalSet;

Expected<bool> RematPass::run(ir::Graph& graph) {
  PlanCandidate g{&graph};
  Expected<PlanSelection> s = selectTrainingPlan(std::span<const PlanCandidate>(&g, 1), strategy_, options_);
  if (!s) return s.error().withContext("remat: ");
  report_ = s->report;
  return report_.recomputeNodes > 0;
}

namespace {

// One strategy's row into `row`: the plan it chooses under `budget` (or without one), measured
// in `measured`, which the other rows share; left empty when the strategy has no proposal for
// the graph.
Status strategyRow(ir::Graph& joint, std::optional<std::int64_t> budget,
                   const std::shared_ptr<const remat::Analysis>& analysis, Measurements& measured,
                   RematStrategy strategy, std::optional<StrategySummary>& row) {
  ProposalSet proposals(&measured);
  if (Status s = proposals.add(joint, PlanConfig{}, strategy, budget.has_value(), {}, analysis); !s) return s.error();
  std::vector<Proposal> order = proposals.entries(Objective{});
  StrategySummary r;
  r.strategy = strategy;
  std::optional<Proposal> pick = budget ? firstFit(proposals, order, *budget) : withoutBudget(proposals, order, strategy);
  if (!pick) {
    r.fits = false;
    pick = smallestPeak(proposals, order);
  }
  if (!pick) return {};
  const ProposalGraph& s = proposals.state(pick->graph);
  r.predictedPeakBytes = proposals.peak(*pick);
  r.recomputeFlops = pick->flops;
  r.recomputePercent = s.analysis->forwardFlops > 0 ? 100.0 * static_cast<double>(r.recomputeFlops) /
                                                          static_cast<double>(s.analysis->forwardFlops)
                                                   : 0.0;
  r.plan = proposals.candidate(*pick).description;
  row = std::move(r);
  return {};
}

}  // namespace

Expected<std::vector<StrategySummary>> summarizeStrategies(ir::Graph& joint, std::optional<std::int64_t> budget) {
  std::vector<RematStrategy> strategies = concreteRematStrategies();
  strategies.push_back(RematStrategy::Auto);
  // One analysis and one set of measurements for all the strategies (their proposals overlap).
  Expected<remat::Analysis> analyzed = remat::analyze(joint);
  if (!analyzed) return analyzed.error();
  const auto analysis = std::make_shared<const remat::Analysis>(std::move(*analyzed));
  Measurements measured;
  // Two workers measure the rows, each taking the next strategy left, memory-poor's first
  // (its proposal recomputes most: its plan and step graph are the largest). A worker that
  // needs a plan or a measurement the other is making waits for it (Measurements). Every row
  // measures the graph at its own chunk count, so nothing writes it (setLossChunks).
  std::vector<size_t> byCost(strategies.size());
  std::iota(byCost.begin(), byCost.end(), size_t{0});
  std::stable_partition(byCost.begin(), byCost.end(),
                        [&](size_t i) { return strategies[i] == RematStrategy::MemoryPoor; });
  std::vector<std::optional<StrategySummary>> found(strategies.size());
  std::vector<Status> failed(strategies.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < byCost.size();) {
      const size_t i = byCost[k];
      failed[i] = strategyRow(joint, budget, analysis, measured, strategies[i], found[i]);
    }
  };
  // An exception on the second worker (an allocation failure) reaches the caller through get().
  std::future<void> second = std::async(std::launch::async, work);
  work();
  second.get();

  std::vector<StrategySummary> rows;
  for (size_t i = 0; i < strategies.size(); ++i) {
    if (!failed[i]) return failed[i].error();
    if (found[i]) rows.push_back(std::move(*found[i]));
  }
  // Saved against the step as it is, which the none row measured (its plan changes nothing).
  auto none = std::find_if(rows.begin(), rows.end(), [](const StrategySummary& r) { return r.strategy == RematStrategy::None; });
  const std::int64_t nonePeak = none != rows.end() ? none->predictedPeakBytes : scheduledPeakBytes(joint);
  for (StrategySummary& row : rows) row.savedBytes = nonePeak - row.predictedPeakBytes;
  return rows;
}

}  // namespace gradc::passes
