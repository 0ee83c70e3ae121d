#include "passes/plan/plan_selection.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_set>

#include "ir/printer.h"
#include "passes/budget.h"
#include "passes/fuse_loss.h"
#include "passes/memory/liveness.h"
#include "passes/plan/proposal_set.h"
#include "passes/schedule.h"

namespace gradc::passes {

using search::Measurements;
using search::Proposal;
using search::ProposalGraph;
using search::ProposalSet;

namespace {

// What is live at the peak, largest first, then the peak node's own working set:
// "parameters + optimizer state 38.0 MiB, activations 30.1 MiB, gradients 12.0 MiB; the working
// set of op 'gelu_backward' at node '%138 = ...' is 24.0 MiB (operands, results and kernel
// workspace)".
std::string dominance(const ir::Graph& graph, const ScheduledLiveness& scheduled) {
  const Liveness& l = scheduled.liveness;
  std::map<std::string, std::int64_t> parts;
  for (const Buffer& b : l.buffers) {
    if (b.firstStep > l.peakStep || b.lastStep < l.peakStep) continue;
    switch (b.kind) {
      case BufferKind::Param:
      case BufferKind::OptState: parts["parameters + optimizer state"] += b.bytes; break;
      case BufferKind::Input: parts["inputs"] += b.bytes; break;
      case BufferKind::Activation: parts["activations"] += b.bytes; break;
      case BufferKind::Gradient: parts["gradients"] += b.bytes; break;
      case BufferKind::Optimizer: parts["optimizer temporaries"] += b.bytes; break;
      case BufferKind::Recompute: parts["recomputed activations"] += b.bytes; break;
      case BufferKind::Comm: parts["communication buffers"] += b.bytes; break;
      case BufferKind::Workspace: parts["kernel workspace"] += b.bytes; break;  // not a liveness buffer
    }
  }
  if (l.peakStep < static_cast<int>(l.workspaceBytes.size()) && l.workspaceBytes[static_cast<size_t>(l.peakStep)] > 0)
    parts["kernel workspace"] += l.workspaceBytes[static_cast<size_t>(l.peakStep)];
  std::vector<std::pair<std::int64_t, std::string>> sorted;
  for (const auto& [name, bytes] : parts)
    if (bytes > 0) sorted.push_back({bytes, name});
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [bytes, name] : sorted) out += (out.empty() ? "" : ", ") + name + " " + formatBytes(bytes);
  if (l.peakStep < 0 || l.peakStep >= static_cast<int>(scheduled.order.size())) return out;
  const ir::Node& node = *scheduled.order[static_cast<size_t>(l.peakStep)];
  std::unordered_set<const ir::Value*> seen;
  std::int64_t working = node.workspaceBytes(graph.kernelSetting());
  for (const ir::Value* v : node.operands())
    if (seen.insert(v).second) working += v->type().bytes();
  for (size_t r = 0; r < node.numResults(); ++r) working += node.result(r)->type().bytes();
  return out + "; the working set of op '" + std::string(node.opName()) + "' at node '" +
         ir::printNode(node, ir::ValueNames(graph)) + "' is " + formatBytes(working) +
         " (operands, results and kernel workspace)";
}

std::string describe(const remat::Candidate& c, const PlanConfig& config) {
  return c.description + describePlanConfig(config);
}

}  // namespace

Expected<PlanSelection> selectTrainingPlan(std::span<const PlanCandidate> graphs, RematStrategy strategy,
                                           const PlanOptions& options) {
  if (graphs.empty()) return Error{"remat: no graph to plan"};
  if (Status s = options.objective.check(); !s) return s.error();
  if (options.budgetBytes && *options.budgetBytes <= 0) return Error{"remat: the budget must be positive"};
  if (options.budgetBytes && options.planBudget() <= 0)
    return Error{"a budget of " + formatBytesExact(*options.budgetBytes) + " leaves nothing for the step beside the " +
                 formatBytesExact(options.reserveBytes) + " reserved for the device's libraries"};
  const int chunksAsGiven = lossChunksOf(*graphs[0].graph);
  Measurements measured;
  ProposalSet proposals(&measured);
  const bool withPath = options.budgetBytes.has_value();
  for (const PlanCandidate& g : graphs)
    if (Status s = proposals.add(*g.graph, g.config, strategy, withPath, g.lossChunks); !s)
      return s.error();
  const Objective& objective = options.objective;
  std::vector<Proposal> order = proposals.entries(objective);
  if (order.empty()) {
    if (objective.maxRecomputePercent) {
      char cap[32];
      std::snprintf(cap, sizeof cap, "%g%%", *objective.maxRecomputePercent);
      return Error{"no " + std::string(rematStrategyName(strategy)) + " plan recomputes at most " + cap +
                   " of a forward (a larger --max-recompute, or another --remat)"};
    }
    return internalError("remat", "no proposal");
  }

  std::optional<Proposal> chosen;
  if (options.budgetBytes) {
    if (objective.goal == PlanGoal::LeastPeak) {
      if (std::optional<Proposal> least = smallestPeak(proposals, order);
          least && proposals.peak(*least) <= options.planBudget())
        chosen = least;
    } else {
      chosen = firstFit(proposals, order, options.planBudget());
    }
    if (!chosen) {
      const Proposal best = *smallestPeak(proposals, order);
      ProposalGraph& s = proposals.state(best.graph);
      remat::AppliedRewrite applied = proposals.apply(best);
      const ScheduledLiveness scheduled = scheduleAndAnalyze(*s.graph);
      const Liveness& l = scheduled.liveness;
      const std::string why = dominance(*s.graph, scheduled);
      remat::undoRewrite(*s.graph, applied);
      std::string message = "no plan fits " + formatBytesExact(*options.budgetBytes);
      if (options.reserveBytes > 0)
        message += " (" + formatBytesExact(options.reserveBytes) + " of it reserved for the device's libraries)";
      if (strategy != RematStrategy::Auto)
        message += " with --remat " + std::string(rematStrategyName(strategy));
      if (objective.maxRecomputePercent) message += " (" + objective.describe() + ")";
      message += "; the smallest feasible budget is " + formatBytesExact(l.peakBytes + options.reserveBytes) +
                 ", reached with " +
                 describe(proposals.candidate(best), best.config) + " (dominated by: " + why + ")";
      if (strategy != RematStrategy::Auto) {
        // Would another strategy do better? Measured on the same graphs.
        ProposalSet all(&measured);
        for (size_t gi = 0; gi < graphs.size(); ++gi) {
          const PlanCandidate& g = graphs[gi];
          if (Status st = all.add(*g.graph, g.config, RematStrategy::Auto, true, g.lossChunks, proposals.state(gi).analysis);
              !st)
            return st.error();
        }
        std::vector<Proposal> allOrder = all.entries(objective);
        if (std::optional<Proposal> fit = firstFit(all, allOrder, options.planBudget()))
          message += "; --remat auto fits (" + describe(all.candidate(*fit), fit->config) + ", peak " +
                     formatBytes(all.peak(*fit)) + ")";
        else if (std::optional<Proposal> low = smallestPeak(all, allOrder); low && all.peak(*low) < l.peakBytes)
          message += "; --remat auto reaches " + formatBytesExact(all.peak(*low) + options.reserveBytes);
      }
      return infeasibleBudgetError(std::move(message), l.peakBytes + options.reserveBytes);
    }
  } else if (objective.goal == PlanGoal::LeastPeak) {
    chosen = smallestPeak(proposals, order);
  } else if (objective.goal == PlanGoal::Throughput) {
    chosen = order.front();  // nothing to fit: the fastest
  } else {
    chosen = withoutBudget(proposals, order, strategy);
  }

  ProposalGraph& s = proposals.state(chosen->graph);
  const RewritePlan& plan = proposals.plan(chosen->graph, chosen->candidate);
  // The applied graph is the one measured (applyRewrite is deterministic), so its peak is known.
  const std::int64_t peak = proposals.peak(*chosen);
  // The step as given (graph 0 at its chunking, nothing recomputed): the chosen plan itself
  // when that is what was chosen, else scheduled on its own.
  std::int64_t baseline = peak;
  if (chosen->graph != 0 || !plan.clones.empty() || !plan.rewires.empty() || chosen->config.lossChunks != chunksAsGiven) {
    if (chunksAsGiven > 0) setLossChunks(*graphs[0].graph, chunksAsGiven);
    baseline = scheduledPeakBytes(*graphs[0].graph);
  }
  PlanSelection out;
  out.rewrite = remat::byIds(plan);
  out.structure = remat::structureOf(*s.graph);
  proposals.apply(*chosen);

  out.graph = chosen->graph;
  TrainingPlanReport& r = out.report;
  r.requested = strategy;
  r.chosen = s.candidates[chosen->candidate].strategy;
  r.plan = describe(s.candidates[chosen->candidate], chosen->config);
  r.proposal = s.candidates[chosen->candidate].description;
  r.config = chosen->config;
  r.budgetBytes = options.budgetBytes.value_or(-1);
  r.predictedPeakBytes = peak;
  r.peakWithoutRematBytes = baseline;
  r.savedBytes = baseline - peak;
  r.forwardFlops = s.analysis->forwardFlops;
  r.recomputeFlops = plan.recomputeFlops;
  // Recomputed nodes, not the gathers made again for them (stage 3).
  r.recomputeNodes = static_cast<int>(std::count_if(plan.clones.begin(), plan.clones.end(), [](const CloneOp& c) {
    return c.of->op().collective == ir::Collective::None;
  }));
  r.chainStages = s.analysis->episodes.empty() ? 0 : static_cast<int>(s.analysis->episodes[0].model.size());
  r.candidates = static_cast<int>(proposals.size());
  r.evaluated = proposals.evaluated();
  r.scheduled = proposals.scheduled();
  if (objective.costs) r.predictedStepSeconds = objective.costs->stepSeconds(*s.graph);
  return out;
}

}  // namespace gradc::passes
