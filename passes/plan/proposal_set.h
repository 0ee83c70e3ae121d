// The measured set of training-plan proposals: every recompute proposal of every candidate step
// graph (micro-batch counts, ZeRO stages, loss chunkings; passes/plan/step_pipeline.h), each
// planned (a RewritePlan, passes/memory/rewrite_plan.h) and measured on demand on the step graph
// its rewrite would make (passes/memory/step_graph.h), never on a rewritten graph. The selection
// (passes/plan/plan_selection.h) and the strategy summary (passes/remat.h) search it.
//
// What is known of one proposal's peak, measured lazily: its program-order peak (an upper bound:
// the schedule pass never does worse than the input order), a lower bound no order can beat
// (passes/memory/peak_bound.h), and, once a decision needs it, the scheduled peak itself -- the
// peak the emitted memory plan will have. Measurements are memoised by (graph, proposal
// description, loss chunks) and can be shared by several sets over the same graphs on several
// threads (Measurements).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/fuse_loss.h"
#include "passes/memory/lifetimes.h"
#include "passes/memory/peak_bound.h"
#include "passes/memory/rewrite_plan.h"
#include "passes/memory/step_graph.h"
#include "passes/plan/objective.h"
#include "passes/remat_free_path.h"
#include "passes/remat_strategies.h"
#include "passes/schedule.h"

namespace gradc::passes::search {

inline int strategyRank(RematStrategy s) {
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
// (passes/memory/peak_bound.h), and, once needed, the scheduled peak itself, the one decisions use.
struct PeakFacts {
  std::int64_t programOrder = 0;
  std::int64_t lowerBound = 0;
  std::optional<std::int64_t> scheduled;
};

struct ProposalGraph {
  ir::Graph* graph = nullptr;
  PlanConfig config;            // how the graph was built (passes/plan/plan_config.h)
  std::vector<int> lossChunks;  // the counts to measure; {current} when not varied (0: unfused)
  std::shared_ptr<const remat::Analysis> analysis;  // shared by the sets over the same graph
  std::vector<remat::Candidate> candidates;
  std::map<int, double> seconds;  // predicted step time without recompute, by chunk count (throughput only)
};

struct Proposal {
  size_t graph;
  size_t candidate;
  size_t chunkIndex;
  std::int64_t flops;
  PlanConfig config;  // its graph's, at the chunk count measured (config.lossChunks)
  int rank;
  double seconds = 0;  // predicted step time (throughput only): the graph's plus its clones'
};

// One memo entry, worked out once: the first set to need it computes it holding the entry's
// lock; a set on another thread that needs it meanwhile waits for it instead of computing it
// again.
template <typename T>
struct Slot {
  std::mutex lock;
  std::optional<T> value;
};

// What a set has worked out, by graph index, and sets over the same graphs (different
// strategies, possibly on different threads: summarizeStrategies) share: a proposal's
// description names its plan, so rewrite plans are kept by (graph, description), measurements
// by (graph, description, loss chunks), and step facts by (graph, loss chunks). Map entries
// never move, so references to them stay valid; `lock` guards the maps themselves, each
// entry's own lock its value. A plan or step facts entry is never changed once set; a peak
// entry gains its scheduled peak later, so it is read under its lock and handed out by value.
struct Measurements {
  std::mutex lock;
  std::map<std::tuple<size_t, std::string, int>, Slot<PeakFacts>> peaks;
  std::map<std::pair<size_t, std::string>, Slot<RewritePlan>> plans;
  std::map<std::pair<size_t, int>, Slot<StepFacts>> facts;

  template <typename Map>
  typename Map::mapped_type& slot(Map& map, const typename Map::key_type& key) {
    std::lock_guard<std::mutex> guard(lock);
    return map[key];
  }
};

class ProposalSet {
 public:
  // With `shared`, measurements are kept there (for other sets over the same graphs).
  explicit ProposalSet(Measurements* shared = nullptr) : known_(shared ? shared : &own_) {}
  ProposalSet(const ProposalSet&) = delete;  // known_ may point into the set itself
  ProposalSet& operator=(const ProposalSet&) = delete;

  // withPath: auto also proposes the free-recompute path (passes/remat_free_path.h), which
  // costs a schedule per value it tries.
  Status add(ir::Graph& graph, const PlanConfig& config, RematStrategy strategy, bool withPath,
             std::vector<int> lossChunks = {}, std::shared_ptr<const remat::Analysis> analysis = nullptr) {
    if (!analysis) {
      Expected<remat::Analysis> a = remat::analyze(graph);
      if (!a) return a.error();
      analysis = std::make_shared<const remat::Analysis>(std::move(*a));
    }
    ProposalGraph s;
    s.graph = &graph;
    s.config = config;
    s.lossChunks = lossChunks.empty() ? std::vector<int>{lossChunksOf(graph)} : std::move(lossChunks);
    s.analysis = std::move(analysis);
    states_.push_back(std::move(s));
    ProposalGraph& added = states_.back();
    // The free-recompute path is measured to be made; only a budget can choose it (without
    // one auto keeps everything).
    const StepFacts* measureOn =
        strategy == RematStrategy::Auto && withPath ? &factsAt(states_.size() - 1, added.lossChunks.back()) : nullptr;
    added.candidates = remat::candidatesWithFreePath(*added.analysis, strategy, measureOn);
    return {};
  }

  // Every proposal the objective admits, in its order (Objective::precedes; ties in proposal
  // order).
  std::vector<Proposal> entries(const Objective& objective) {
    std::vector<Proposal> out;
    for (size_t g = 0; g < states_.size(); ++g)
      for (size_t c = 0; c < states_[g].candidates.size(); ++c)
        for (size_t k = 0; k < states_[g].lossChunks.size(); ++k) {
          PlanConfig config = states_[g].config;
          config.lossChunks = states_[g].lossChunks[k];
          Proposal e{g, c, k, plan(g, c).recomputeFlops, config, strategyRank(states_[g].candidates[c].strategy)};
          if (!objective.admits(cost(e), states_[g].analysis->forwardFlops)) continue;
          if (objective.costs) e.seconds = predictedSeconds(g, c, e.config.lossChunks, *objective.costs);
          out.push_back(e);
        }
    std::stable_sort(out.begin(), out.end(),
                     [&](const Proposal& x, const Proposal& y) { return objective.before(cost(x), cost(y)); });
    return out;
  }
  static PlanCost cost(const Proposal& e) {
    return PlanCost{e.config, e.flops, e.rank, e.seconds};
  }

  // The step time the cost table predicts for proposal c of graph g at `lossChunks`: the
  // graph's nodes (a fused loss at that chunk count), plus a second run of each node the
  // rewrite clones.
  double predictedSeconds(size_t g, size_t c, int lossChunks, const ir::CostTable& costs) {
    ProposalGraph& s = states_[g];
    const int threads = s.graph->kernelThreads();
    auto seconds = [&](const ir::Node& n) {
      return lossChunks > 0 && ir::getInt(n.attrs(), "chunks") ? costs.nodeSeconds(n, threads, lossChunks)
                                                                : costs.nodeSeconds(n, threads);
    };
    auto known = s.seconds.find(lossChunks);
    if (known == s.seconds.end()) {
      double total = 0;
      for (const auto& n : s.graph->nodes()) total += seconds(*n);
      known = s.seconds.emplace(lossChunks, total).first;
    }
    double total = known->second;
    for (const CloneOp& clone : plan(g, c).clones) total += seconds(*clone.of);
    return total;
  }

  const RewritePlan& plan(size_t g, size_t c) {
    const ProposalGraph& s = states_[g];
    Slot<RewritePlan>& slot = known_->slot(known_->plans, {g, s.candidates[c].description});
    std::lock_guard<std::mutex> guard(slot.lock);
    if (!slot.value) slot.value.emplace(remat::planRewrite(*s.analysis, s.candidates[c]));
    return *slot.value;
  }

  // The program-order peak and the lower bound, and the scheduled peak too when `schedule`
  // says so for the facts found: all on the step graph the rewrite would make
  // (passes/memory/step_graph.h), built without touching the graph.
  template <typename ScheduleWhen>
  PeakFacts measure(const Proposal& e, ScheduleWhen schedule) {
    const ProposalGraph& s = states_[e.graph];
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
  const StepFacts& stepFacts(const Proposal& e) { return factsAt(e.graph, e.config.lossChunks); }
  const StepFacts& factsAt(size_t g, int lossChunks) {
    Slot<StepFacts>& slot = known_->slot(known_->facts, {g, lossChunks});
    std::lock_guard<std::mutex> guard(slot.lock);
    if (slot.value) return *slot.value;
    ir::Graph& graph = *states_[g].graph;
    if (lossChunks > 0) setLossChunks(graph, lossChunks);
    return slot.value.emplace(graph, analyzeStorage(graph));
  }

  // No plan of the entry's graph peaks below this (StepFacts::persistentBytes).
  std::int64_t floorBytes(const Proposal& e) { return stepFacts(e).persistentBytes(); }

  PeakFacts bounds(const Proposal& e) {
    return measure(e, [](const PeakFacts&) { return false; });
  }

  // The scheduled peak: what the emitted plan will hold.
  std::int64_t peak(const Proposal& e) {
    return *measure(e, [](const PeakFacts&) { return true; }).scheduled;
  }

  // peak(e) <= budget. The bounds decide when they can: the schedule pass's order is never
  // worse than the input order's (passes/schedule.h), and no order beats the lower bound.
  // The caller confirms a fit on the scheduled peak (firstFit) before relying on it.
  bool fits(const Proposal& e, std::int64_t budget) {
    const PeakFacts facts = measure(e, [budget](const PeakFacts& f) {
      return f.programOrder > budget && f.lowerBound <= budget;
    });
    if (facts.scheduled) return *facts.scheduled <= budget;
    return facts.programOrder <= budget;
  }

  // The entry's proposal at the most chunks its graph allows: the least peak the proposal
  // reaches (more chunks never need more memory).
  Proposal finest(const Proposal& e) const {
    Proposal f = e;
    f.chunkIndex = states_[e.graph].lossChunks.size() - 1;
    f.config.lossChunks = states_[e.graph].lossChunks.back();
    return f;
  }
  bool isFinest(const Proposal& e) const { return e.chunkIndex + 1 == states_[e.graph].lossChunks.size(); }

  // Applies an entry's plan (rewrite and chunk count) to its graph; the undo handle.
  remat::AppliedRewrite apply(const Proposal& e) {
    ProposalGraph& s = states_[e.graph];
    remat::AppliedRewrite applied = remat::applyRewrite(*s.graph, plan(e.graph, e.candidate));
    if (e.config.fusedLoss()) setLossChunks(*s.graph, e.config.lossChunks);
    return applied;
  }

  ProposalGraph& state(size_t g) { return states_[g]; }
  const remat::Candidate& candidate(const Proposal& e) const { return states_[e.graph].candidates[e.candidate]; }
  int evaluated() const { return evaluated_; }
  int scheduled() const { return scheduled_; }
  size_t size() const {
    size_t n = 0;
    for (const ProposalGraph& s : states_) n += s.candidates.size() * s.lossChunks.size();
    return n;
  }

 private:
  Measurements own_;
  Measurements* known_;  // own_, or the one shared
  std::vector<ProposalGraph> states_;
  int evaluated_ = 0;
  int scheduled_ = 0;
};

// Whether firstFit takes the proposal under `budget`: its scheduled peak fits. A proposal that
// does not fit at its finest chunking fits at no coarser one: it is skipped without measuring
// the coarser.
bool fitsUnder(ProposalSet& proposals, const Proposal& e, std::int64_t budget);
// The first proposal in selection order that fits.
std::optional<Proposal> firstFit(ProposalSet& proposals, const std::vector<Proposal>& order, std::int64_t budget);
// The least scheduled peak over the finest chunking of each proposal (the coarser ones never
// reach a smaller one), searched in lower-bound order and stopped at the first bound no
// smaller than the best peak found. Ties keep the earliest proposal in selection order.
std::optional<Proposal> smallestPeak(ProposalSet& proposals, const std::vector<Proposal>& order);
// firstFit(order, least peak + 5%), decided without finding the least peak when it can be;
// nullopt when an earlier proposal might fit.
std::optional<Proposal> firstFitNearFloor(ProposalSet& proposals, const std::vector<Proposal>& order);
// The plan a strategy applies without a budget: chain takes the least recompute within 5% of
// its smallest peak; the others their one plan (auto and none: nothing recomputed).
std::optional<Proposal> withoutBudget(ProposalSet& proposals, const std::vector<Proposal>& order, RematStrategy strategy);

}  // namespace gradc::passes::search
