#include "passes/remat.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <tuple>
#include <unordered_set>

#include "ir/printer.h"
#include "passes/budget.h"
#include "passes/fuse_loss.h"
#include "passes/liveness.h"
#include "passes/peak_bound.h"
#include "passes/remat_free_path.h"
#include "passes/schedule.h"
#include "passes/step_graph.h"

namespace gradc::passes {

namespace {

int strategyRank(RematStrategy s) {
  switch (s) {
    case RematStrategy::None: return 0;
    case RematStrategy::Selective: return 1;
    case RematStrategy::Chain: return 2;
    case RematStrategy::Sqrt: return 3;
    case RematStrategy::MemoryPoor: return 4;
    case RematStrategy::Auto: return 5;
  }
  return 6;
}

// The proposals of one graph, planned and measured on demand. A graph with a fused loss is
// measured at each of its chunk counts (setLossChunks changes only the fused nodes' workspace).
// What is known of one proposal's peak: the program order's (an upper bound: the schedule
// pass never does worse than the input order), a lower bound that no order can beat
// (passes/peak_bound.h), and, once needed, the scheduled peak itself, the one decisions use.
struct PeakFacts {
  std::int64_t programOrder = 0;
  std::int64_t lowerBound = 0;
  std::optional<std::int64_t> scheduled;
};

struct GraphState {
  ir::Graph* graph = nullptr;
  int microBatches = 1;
  std::vector<int> lossChunks;  // the counts to measure; {current} when not varied (0: unfused)
  int shardStage = 0;
  std::shared_ptr<const remat::Analysis> analysis;  // shared by choosers over the same graph
  std::vector<remat::Candidate> candidates;
};

struct Entry {
  size_t graph;
  size_t candidate;
  size_t chunkIndex;
  std::int64_t flops;
  int microBatches;
  int shardStage;
  int lossChunks;
  int rank;
};

// One memo entry, worked out once: the first chooser to need it computes it holding the
// entry's lock; a chooser on another thread that needs it meanwhile waits for it instead of
// computing it again.
template <typename T>
struct Slot {
  std::mutex lock;
  std::optional<T> value;
};

// What a chooser has worked out, by graph index, and choosers over the same graphs (different
// strategies, possibly on different threads: summarizeStrategies) share: a proposal's
// description names its plan, so rewrite plans are kept by (graph, description), measurements
// by (graph, description, loss chunks), and step facts by (graph, loss chunks). Map entries
// never move, so references to them stay valid; `lock` guards the maps themselves, each
// entry's own lock its value. A plan or step facts entry is never changed once set; a peak
// entry gains its scheduled peak later, so it is read under its lock and handed out by value.
struct Measurements {
  std::mutex lock;
  std::map<std::tuple<size_t, std::string, int>, Slot<PeakFacts>> peaks;
  std::map<std::pair<size_t, std::string>, Slot<remat::RewritePlan>> plans;
  std::map<std::pair<size_t, int>, Slot<StepFacts>> facts;

  template <typename Map>
  typename Map::mapped_type& slot(Map& map, const typename Map::key_type& key) {
    std::lock_guard<std::mutex> guard(lock);
    return map[key];
  }
};

class Chooser {
 public:
  // With `shared`, measurements are kept there (for other choosers over the same graphs).
  explicit Chooser(Measurements* shared = nullptr) : known_(shared ? shared : &own_) {}
  Chooser(const Chooser&) = delete;  // known_ may point into the chooser itself
  Chooser& operator=(const Chooser&) = delete;

  // withPath: auto also proposes the free-recompute path (passes/remat_free_path.h), which
  // costs a schedule per value it tries.
  Status add(ir::Graph& graph, int microBatches, RematStrategy strategy, bool withPath, std::vector<int> lossChunks = {},
             int shardStage = 0, std::shared_ptr<const remat::Analysis> analysis = nullptr) {
    if (!analysis) {
      Expected<remat::Analysis> a = remat::analyze(graph);
      if (!a) return a.error();
      analysis = std::make_shared<const remat::Analysis>(std::move(*a));
    }
    GraphState s;
    s.graph = &graph;
    s.microBatches = microBatches;
    s.shardStage = shardStage;
    s.lossChunks = lossChunks.empty() ? std::vector<int>{lossChunksOf(graph)} : std::move(lossChunks);
    s.analysis = std::move(analysis);
    states_.push_back(std::move(s));
    GraphState& added = states_.back();
    // The free-recompute path is measured to be made; only a budget can choose it (without
    // one auto keeps everything).
    const StepFacts* measureOn =
        strategy == RematStrategy::Auto && withPath ? &factsAt(states_.size() - 1, added.lossChunks.back()) : nullptr;
    added.candidates = remat::candidatesWithFreePath(*added.analysis, strategy, measureOn);
    return {};
  }

  // Every proposal the objective admits, in its order (Objective::precedes; ties in proposal
  // order).
  std::vector<Entry> entries(const Objective& objective) {
    std::vector<Entry> out;
    for (size_t g = 0; g < states_.size(); ++g)
      for (size_t c = 0; c < states_[g].candidates.size(); ++c)
        for (size_t k = 0; k < states_[g].lossChunks.size(); ++k) {
          Entry e{g, c, k, plan(g, c).recomputeFlops, states_[g].microBatches, states_[g].shardStage,
                  states_[g].lossChunks[k], strategyRank(states_[g].candidates[c].strategy)};
          if (objective.admits(cost(e), states_[g].analysis->forwardFlops)) out.push_back(e);
        }
    std::stable_sort(out.begin(), out.end(),
                     [](const Entry& x, const Entry& y) { return Objective::precedes(cost(x), cost(y)); });
    return out;
  }
  static PlanCost cost(const Entry& e) { return PlanCost{e.flops, e.microBatches, e.shardStage, e.lossChunks, e.rank}; }

  const remat::RewritePlan& plan(size_t g, size_t c) {
    const GraphState& s = states_[g];
    Slot<remat::RewritePlan>& slot = known_->slot(known_->plans, {g, s.candidates[c].description});
    std::lock_guard<std::mutex> guard(slot.lock);
    if (!slot.value) slot.value.emplace(remat::planRewrite(*s.analysis, s.candidates[c]));
    return *slot.value;
  }

  // The program-order peak and the lower bound, and the scheduled peak too when `schedule`
  // says so for the facts found: all on the step graph the rewrite would make
  // (passes/step_graph.h), built without touching the graph.
  template <typename ScheduleWhen>
  PeakFacts measure(const Entry& e, ScheduleWhen schedule) {
    const GraphState& s = states_[e.graph];
    Slot<PeakFacts>& slot =
        known_->slot(known_->peaks, {e.graph, s.candidates[e.candidate].description, s.lossChunks[e.chunkIndex]});
    std::lock_guard<std::mutex> guard(slot.lock);
    if (slot.value && (slot.value->scheduled || !schedule(*slot.value))) return *slot.value;

    const StepGraph step = buildStepGraph(stepFacts(e), &plan(e.graph, e.candidate));
    if (!slot.value) {
      const std::vector<int> order = programOrder(step);
      const StepPeak inOrder = stepPeak(step, order);
      PeakFacts facts;
      facts.programOrder = inOrder.bytes;
      facts.lowerBound = peakLowerBoundNear(step, order, inOrder.step);
      slot.value = facts;
      ++evaluated_;
    }
    if (schedule(*slot.value)) {
      slot.value->scheduled = scheduledPeak(step).bytes;
      ++scheduled_;
    }
    return *slot.value;
  }

  // The step facts of an entry's graph at its chunk count, built on first use (the chunk
  // count changes only the fused loss nodes' workspace).
  const StepFacts& stepFacts(const Entry& e) { return factsAt(e.graph, e.lossChunks); }
  const StepFacts& factsAt(size_t g, int lossChunks) {
    Slot<StepFacts>& slot = known_->slot(known_->facts, {g, lossChunks});
    std::lock_guard<std::mutex> guard(slot.lock);
    if (slot.value) return *slot.value;
    ir::Graph& graph = *states_[g].graph;
    if (lossChunks > 0) setLossChunks(graph, lossChunks);
    return slot.value.emplace(graph, analyzeStorage(graph));
  }

  // No plan of the entry's graph peaks below this (StepFacts::persistentBytes).
  std::int64_t floorBytes(const Entry& e) { return stepFacts(e).persistentBytes(); }

  PeakFacts bounds(const Entry& e) {
    return measure(e, [](const PeakFacts&) { return false; });
  }

  // The scheduled peak: what the emitted plan will hold.
  std::int64_t peak(const Entry& e) {
    return *measure(e, [](const PeakFacts&) { return true; }).scheduled;
  }

  // peak(e) <= budget. The bounds decide when they can: the schedule pass's order is never
  // worse than the input order's (passes/schedule.h), and no order beats the lower bound.
  // The caller confirms a fit on the scheduled peak (firstFit) before relying on it.
  bool fits(const Entry& e, std::int64_t budget) {
    const PeakFacts facts = measure(e, [budget](const PeakFacts& f) {
      return f.programOrder > budget && f.lowerBound <= budget;
    });
    if (facts.scheduled) return *facts.scheduled <= budget;
    return facts.programOrder <= budget;
  }

  // The entry's proposal at the most chunks its graph allows: the least peak the proposal
  // reaches (more chunks never need more memory).
  Entry finest(const Entry& e) const {
    Entry f = e;
    f.chunkIndex = states_[e.graph].lossChunks.size() - 1;
    f.lossChunks = states_[e.graph].lossChunks.back();
    return f;
  }
  bool isFinest(const Entry& e) const { return e.chunkIndex + 1 == states_[e.graph].lossChunks.size(); }

  // Applies an entry's plan (rewrite and chunk count) to its graph; the undo handle.
  remat::AppliedRewrite apply(const Entry& e) {
    GraphState& s = states_[e.graph];
    remat::AppliedRewrite applied = remat::applyRewrite(*s.graph, plan(e.graph, e.candidate));
    if (e.lossChunks > 0) setLossChunks(*s.graph, e.lossChunks);
    return applied;
  }

  GraphState& state(size_t g) { return states_[g]; }
  const remat::Candidate& candidate(const Entry& e) const { return states_[e.graph].candidates[e.candidate]; }
  int evaluated() const { return evaluated_; }
  int scheduled() const { return scheduled_; }
  size_t size() const {
    size_t n = 0;
    for (const GraphState& s : states_) n += s.candidates.size() * s.lossChunks.size();
    return n;
  }

 private:
  Measurements own_;
  Measurements* known_;  // own_, or the one shared
  std::vector<GraphState> states_;
  int evaluated_ = 0;
  int scheduled_ = 0;
};

// Whether firstFit takes the entry under `budget`: its scheduled peak fits. A proposal that
// does not fit at its finest chunking fits at no coarser one: it is skipped without measuring
// the coarser.
bool fitsUnder(Chooser& chooser, const Entry& e, std::int64_t budget) {
  if (!chooser.isFinest(e) && !chooser.fits(chooser.finest(e), budget)) return false;
  return chooser.fits(e, budget) && chooser.peak(e) <= budget;
}

// The first entry in selection order that fits.
std::optional<Entry> firstFit(Chooser& chooser, const std::vector<Entry>& order, std::int64_t budget) {
  for (const Entry& e : order)
    if (fitsUnder(chooser, e, budget)) return e;
  return std::nullopt;
}

// The least scheduled peak over the finest chunking of each proposal (the coarser ones never
// reach a smaller one). Proposals are scheduled in order of their lower bounds, and the search
// stops at the first bound no smaller than the best peak found: none after it can beat it.
// Ties keep the earliest entry in selection order.
// A proposal whose lower bound is below every program-order peak measured so far is scheduled
// while its step graph is built for the bounds, instead of building it a second time below:
// such a proposal can still be the smallest, and the search usually schedules it.
std::optional<Entry> smallestPeak(Chooser& chooser, const std::vector<Entry>& order) {
  std::vector<size_t> byBound;
  for (size_t i = 0; i < order.size(); ++i)
    if (chooser.isFinest(order[i])) byBound.push_back(i);
  std::int64_t leastProgramOrder = std::numeric_limits<std::int64_t>::max();
  for (size_t i : byBound) {
    const PeakFacts f = chooser.measure(order[i], [&](const PeakFacts& facts) {
      return facts.lowerBound <= std::min(leastProgramOrder, facts.programOrder);
    });
    leastProgramOrder = std::min(leastProgramOrder, f.programOrder);
  }
  std::stable_sort(byBound.begin(), byBound.end(), [&](size_t a, size_t b) {
    return chooser.bounds(order[a]).lowerBound < chooser.bounds(order[b]).lowerBound;
  });
  std::optional<size_t> best;
  for (size_t i : byBound) {
    if (best && chooser.bounds(order[i]).lowerBound > chooser.peak(order[*best])) break;
    const std::int64_t p = chooser.peak(order[i]);
    if (!best || p < chooser.peak(order[*best]) || (p == chooser.peak(order[*best]) && i < *best)) best = i;
  }
  if (!best) return std::nullopt;
  return order[*best];
}

// firstFit(order, L) where L = the least peak plus 5%, decided without finding the least
// peak when it can be. No plan peaks below the floor (the persistent bytes of the graphs), so
// L >= floor + 5%: the entry firstFit finds under floor + 5% fits L. And L <= its peak + 5%:
// when no earlier entry fits that, none fits L, and it is firstFit's answer under L. Only
// bounds and the peaks they leave open are measured, as firstFit does; on a long chain the
// proposals that recompute most (whose step graphs are largest) are never built. nullopt when
// an earlier entry might fit L.
std::optional<Entry> firstFitNearFloor(Chooser& chooser, const std::vector<Entry>& order) {
  auto plus5 = [](std::int64_t bytes) { return bytes + bytes / 20; };
  std::int64_t floor = std::numeric_limits<std::int64_t>::max();
  for (const Entry& e : order)  // the same at every chunking of a graph
    if (chooser.isFinest(e)) floor = std::min(floor, chooser.floorBytes(e));
  for (size_t i = 0; i < order.size(); ++i) {
    if (!fitsUnder(chooser, order[i], plus5(floor))) continue;
    const std::int64_t atMost = plus5(chooser.peak(chooser.finest(order[i])));
    for (size_t j = 0; j < i; ++j)
      if (fitsUnder(chooser, order[j], atMost)) return std::nullopt;
    return order[i];
  }
  return std::nullopt;
}

// The plan a strategy applies without a budget: chain takes the least recompute that comes
// within 5% of its smallest peak (memory-poor reaches the very smallest at many times the
// cost); the others their one plan (auto and none: nothing recomputed).
std::optional<Entry> withoutBudget(Chooser& chooser, const std::vector<Entry>& order, RematStrategy strategy) {
  if (order.empty()) return std::nullopt;
  if (strategy != RematStrategy::Chain) return order.front();
  if (std::optional<Entry> settled = firstFitNearFloor(chooser, order)) return settled;
  const std::int64_t lowest = chooser.peak(*smallestPeak(chooser, order));
  return firstFit(chooser, order, lowest + lowest / 20);
}

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
  std::int64_t working = node.workspaceBytes();
  for (const ir::Value* v : node.operands())
    if (seen.insert(v).second) working += v->type().bytes();
  for (size_t r = 0; r < node.numResults(); ++r) working += node.result(r)->type().bytes();
  return out + "; the working set of op '" + std::string(node.opName()) + "' at node '" +
         ir::printNode(node, ir::ValueNames(graph)) + "' is " + formatBytes(working) +
         " (operands, results and kernel workspace)";
}

std::string describe(const remat::Candidate& c, int microBatches, int lossChunks, int shardStage = 0) {
  std::string d = c.description;
  if (microBatches > 1) d += "; " + std::to_string(microBatches) + " micro-batches";
  if (shardStage == 1) d += "; optimizer state sharded (--shard 1)";
  if (shardStage == 2) d += "; optimizer state and gradients sharded (--shard 2)";
  if (lossChunks > 0) d += "; fused loss in " + std::to_string(lossChunks) + " chunk" + (lossChunks == 1 ? "" : "s");
  return d;
}

}  // namespace

Expected<PlanSelection> selectTrainingPlan(std::span<const PlanCandidate> graphs, const RematOptions& options) {
  if (graphs.empty()) return Error{"remat: no graph to plan"};
  if (options.budgetBytes && *options.budgetBytes <= 0) return Error{"remat: the budget must be positive"};
  if (options.budgetBytes && options.planBudget() <= 0)
    return Error{"a budget of " + formatBytesExact(*options.budgetBytes) + " leaves nothing for the step beside the " +
                 formatBytesExact(options.reserveBytes) + " reserved for the device's libraries"};
  const int chunksAsGiven = lossChunksOf(*graphs[0].graph);
  Measurements measured;
  Chooser chooser(&measured);
  const bool withPath = options.budgetBytes.has_value();
  for (const PlanCandidate& g : graphs)
    if (Status s = chooser.add(*g.graph, g.microBatches, options.strategy, withPath, g.lossChunks, g.shardStage); !s)
      return s.error();
  const Objective& objective = options.objective;
  std::vector<Entry> order = chooser.entries(objective);
  if (order.empty()) {
    if (objective.maxRecomputePercent) {
      char cap[32];
      std::snprintf(cap, sizeof cap, "%g%%", *objective.maxRecomputePercent);
      return Error{"no " + std::string(rematStrategyName(options.strategy)) + " plan recomputes at most " + cap +
                   " of a forward (a larger --max-recompute, or another --remat)"};
    }
    return internalError("remat", "no proposal");
  }

  std::optional<Entry> chosen;
  if (options.budgetBytes) {
    if (objective.goal == PlanGoal::LeastPeak) {
      if (std::optional<Entry> least = smallestPeak(chooser, order);
          least && chooser.peak(*least) <= options.planBudget())
        chosen = least;
    } else {
      chosen = firstFit(chooser, order, options.planBudget());
    }
    if (!chosen) {
      const Entry best = *smallestPeak(chooser, order);
      GraphState& s = chooser.state(best.graph);
      remat::AppliedRewrite applied = chooser.apply(best);
      const ScheduledLiveness scheduled = scheduleAndAnalyze(*s.graph);
      const Liveness& l = scheduled.liveness;
      const std::string why = dominance(*s.graph, scheduled);
      remat::undoRewrite(*s.graph, applied);
      std::string message = "no plan fits " + formatBytesExact(*options.budgetBytes);
      if (options.reserveBytes > 0)
        message += " (" + formatBytesExact(options.reserveBytes) + " of it reserved for the device's libraries)";
      if (options.strategy != RematStrategy::Auto)
        message += " with --remat " + std::string(rematStrategyName(options.strategy));
      if (objective.maxRecomputePercent) message += " (" + objective.describe() + ")";
      message += "; the smallest feasible budget is " + formatBytesExact(l.peakBytes + options.reserveBytes) +
                 ", reached with " +
                 describe(chooser.candidate(best), best.microBatches, best.lossChunks, best.shardStage) + " (dominated by: " + why + ")";
      if (options.strategy != RematStrategy::Auto) {
        // Would another strategy do better? Measured on the same graphs.
        Chooser all(&measured);
        for (size_t gi = 0; gi < graphs.size(); ++gi) {
          const PlanCandidate& g = graphs[gi];
          if (Status st = all.add(*g.graph, g.microBatches, RematStrategy::Auto, true, g.lossChunks, g.shardStage,
                                  chooser.state(gi).analysis);
              !st)
            return st.error();
        }
        std::vector<Entry> allOrder = all.entries(objective);
        if (std::optional<Entry> fit = firstFit(all, allOrder, options.planBudget()))
          message += "; --remat auto fits (" + describe(all.candidate(*fit), fit->microBatches, fit->lossChunks, fit->shardStage) + ", peak " +
                     formatBytes(all.peak(*fit)) + ")";
        else if (std::optional<Entry> low = smallestPeak(all, allOrder); low && all.peak(*low) < l.peakBytes)
          message += "; --remat auto reaches " + formatBytesExact(all.peak(*low) + options.reserveBytes);
      }
      return infeasibleBudgetError(std::move(message), l.peakBytes + options.reserveBytes);
    }
  } else if (objective.goal == PlanGoal::LeastPeak) {
    chosen = smallestPeak(chooser, order);
  } else {
    chosen = withoutBudget(chooser, order, options.strategy);
  }

  GraphState& s = chooser.state(chosen->graph);
  const remat::RewritePlan& plan = chooser.plan(chosen->graph, chosen->candidate);
  // The applied graph is the one measured (applyRewrite is deterministic), so its peak is known.
  const std::int64_t peak = chooser.peak(*chosen);
  // The step as given (graph 0 at its chunking, nothing recomputed): the chosen plan itself
  // when that is what was chosen, else scheduled on its own.
  std::int64_t baseline = peak;
  if (chosen->graph != 0 || !plan.clones.empty() || !plan.rewires.empty() || chosen->lossChunks != chunksAsGiven) {
    if (chunksAsGiven > 0) setLossChunks(*graphs[0].graph, chunksAsGiven);
    baseline = scheduledPeakBytes(*graphs[0].graph);
  }
  PlanSelection out;
  out.rewrite = remat::byIds(plan);
  out.structure = remat::structureOf(*s.graph);
  chooser.apply(*chosen);

  out.graph = chosen->graph;
  TrainingPlanReport& r = out.report;
  r.requested = options.strategy;
  r.chosen = s.candidates[chosen->candidate].strategy;
  r.plan = describe(s.candidates[chosen->candidate], s.microBatches, chosen->lossChunks, s.shardStage);
  r.proposal = s.candidates[chosen->candidate].description;
  r.lossChunks = chosen->lossChunks;
  r.shardStage = s.shardStage;
  r.microBatches = s.microBatches;
  r.budgetBytes = options.budgetBytes.value_or(-1);
  r.predictedPeakBytes = peak;
  r.peakWithoutRematBytes = baseline;
  r.savedBytes = baseline - peak;
  r.forwardFlops = s.analysis->forwardFlops;
  r.recomputeFlops = plan.recomputeFlops;
  r.recomputeNodes = static_cast<int>(plan.clones.size());
  r.chainStages = s.analysis->episodes.empty() ? 0 : static_cast<int>(s.analysis->episodes[0].model.size());
  r.candidates = static_cast<int>(chooser.size());
  r.evaluated = chooser.evaluated();
  r.scheduled = chooser.scheduled();
  return out;
}

Expected<bool> RematPass::run(ir::Graph& graph) {
  PlanCandidate g{&graph, 1};
  Expected<PlanSelection> s = selectTrainingPlan(std::span<const PlanCandidate>(&g, 1), options_);
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
  Chooser chooser(&measured);
  if (Status s = chooser.add(joint, 1, strategy, budget.has_value(), {}, 0, analysis); !s) return s.error();
  std::vector<Entry> order = chooser.entries(Objective{});
  StrategySummary r;
  r.strategy = strategy;
  std::optional<Entry> pick = budget ? firstFit(chooser, order, *budget) : withoutBudget(chooser, order, strategy);
  if (!pick) {
    r.fits = false;
    pick = smallestPeak(chooser, order);
  }
  if (!pick) return {};
  const GraphState& s = chooser.state(pick->graph);
  r.predictedPeakBytes = chooser.peak(*pick);
  r.recomputeFlops = pick->flops;
  r.recomputePercent = s.analysis->forwardFlops > 0 ? 100.0 * static_cast<double>(r.recomputeFlops) /
                                                          static_cast<double>(s.analysis->forwardFlops)
                                                   : 0.0;
  r.plan = chooser.candidate(*pick).description;
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
