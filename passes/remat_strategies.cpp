// The remat strategies: their names, and the proposals each makes from an analysis (stage 3
// of passes/remat_strategies.h). The analysis is in remat_analysis.cpp, the rewrite that makes a
// proposal real in remat_rewrite.cpp.
#include "passes/remat_strategies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <span>

#include "passes/budget.h"

namespace gradc::passes {

// ---- strategy names ------------------------------------------------------------------------------

std::string_view rematStrategyName(RematStrategy strategy) {
  switch (strategy) {
    case RematStrategy::None: return "none";
    case RematStrategy::Sqrt: return "sqrt";
    case RematStrategy::Chain: return "chain";
    case RematStrategy::MemoryPoor: return "memory-poor";
    case RematStrategy::Selective: return "selective";
    case RematStrategy::Auto: return "auto";
  }
  return "?";
}

std::vector<RematStrategy> concreteRematStrategies() {
  return {RematStrategy::None, RematStrategy::Sqrt, RematStrategy::Chain, RematStrategy::MemoryPoor,
          RematStrategy::Selective};
}

Expected<RematStrategy> parseRematStrategy(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (RematStrategy s : {RematStrategy::None, RematStrategy::Sqrt, RematStrategy::Chain, RematStrategy::MemoryPoor,
                          RematStrategy::Selective, RematStrategy::Auto})
    if (rematStrategyName(s) == lower) return s;
  return Error{"unknown remat strategy '" + std::string(name) +
               "'; expected one of: none, sqrt, chain, memory-poor, selective, auto"};
}


namespace remat {

// ---- candidates ----------------------------------------------------------------------------------

namespace {

Candidate uniform(const Analysis& a, RematStrategy strategy, std::string description, EpisodePlan::Kind kind) {
  Candidate c{strategy, std::move(description), {}};
  for (size_t e = 0; e < a.episodes.size(); ++e) c.episodes.push_back(EpisodePlan{kind, {}});
  return c;
}

template <class MakeSchedule>
Candidate scheduled(const Analysis& a, RematStrategy strategy, std::string description, int minStages, MakeSchedule make) {
  Candidate c{strategy, std::move(description), {}};
  for (const Episode& ep : a.episodes) {
    if (static_cast<int>(ep.model.size()) < minStages)
      c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Keep, {}});
    else
      c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Schedule, make(ep)});
  }
  return c;
}

// Frontier levels thinned to at most about kMaxChainCandidates, spread evenly in memory and
// at least 1% of the whole frontier's top apart (a plan saving less than that over its
// neighbour is not worth measuring). Always keeps the lowest and the highest level.
std::vector<int> thinned(const std::vector<int>& frontier) {
  if (frontier.size() <= 2) return frontier;
  const int lo = frontier.front(), hi = frontier.back();
  const int gap = std::max({1, (hi - lo) / (kMaxChainCandidates - 1), hi / 100});
  std::vector<int> out = {lo};
  for (size_t i = 1; i + 1 < frontier.size(); ++i)
    if (frontier[i] >= out.back() + gap && frontier[i] + gap <= hi) out.push_back(frontier[i]);
  out.push_back(hi);
  return out;
}

// What the stored stages of a chain proposal recompute inside themselves: nothing, their cheap
// values (Episode::selectiveDrop), or their free ones (Episode::freeDrop).
enum class Inside { Nothing, Cheap, Free };

// The chain solver's frontier. With `inside`, solved on the chain whose stored stages also
// recompute those values (Episode::selectiveModel, Episode::freeModel), and run that way; its
// level that stores every stage is then a selective proposal of its own, so it is left out.
void chainCandidates(const Analysis& a, bool skipNoRecompute, Inside inside, std::vector<Candidate>& out) {
  auto modelOf = [&](const Episode& ep) -> const std::vector<chain::Stage>& {
    return inside == Inside::Cheap ? ep.selectiveModel : inside == Inside::Free ? ep.freeModel : ep.model;
  };
  // One solver per distinct chain (micro-batches repeat the same one).
  std::vector<std::pair<const std::vector<chain::Stage>*, chain::Solver>> solvers;
  std::vector<size_t> solverOf;
  for (const Episode& ep : a.episodes) {
    size_t found = solvers.size();
    for (size_t i = 0; i < solvers.size(); ++i)
      if (*solvers[i].first == modelOf(ep) && solvers[i].second.external().bytes == ep.external.bytes &&
          solvers[i].second.external().lastReader == ep.external.lastReader)
        found = i;
    if (found == solvers.size())
      solvers.push_back({&modelOf(ep), chain::solveChain(modelOf(ep), kSolverLevels, ep.external)});
    solverOf.push_back(found);
  }
  if (a.episodes.empty()) return;
  std::vector<std::vector<int>> levels;
  for (auto& [model, solver] : solvers) levels.push_back(thinned(solver.frontier()));
  const size_t count = levels[solverOf[0]].size();
  const std::string suffix = inside == Inside::Cheap  ? ", cheap values inside stored stages recomputed"
                             : inside == Inside::Free ? ", free values inside stored stages recomputed"
                                                      : "";
  for (size_t j = 0; j < count; ++j) {
    Candidate c{RematStrategy::Chain, {}, {}};
    bool recompute = false;
    for (size_t e = 0; e < a.episodes.size(); ++e) {
      const chain::Solver& solver = solvers[solverOf[e]].second;
      const std::vector<int>& mine = levels[solverOf[e]];
      if (mine.empty() || a.episodes[e].model.size() < 2) {
        c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Keep, {}});
        continue;
      }
      const size_t k = count <= 1 ? mine.size() - 1 : j * (mine.size() - 1) / (count - 1);
      const int level = mine[k];
      const std::int64_t total = chain::totalForwardCost(modelOf(a.episodes[e]));
      if (*solver.cost(level) > total) recompute = true;
      c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Schedule, solver.schedule(level), inside == Inside::Cheap,
                                       inside == Inside::Free});
      if (e == 0)
        c.description = *solver.cost(level) == total
                            ? "chain: store every stage (no recompute)"  // never with `inside`: skipped
                            : "chain: the optimal schedule of " + std::to_string(a.episodes[e].model.size()) +
                                  " stages within " + formatBytes(static_cast<std::int64_t>(level) * solver.unitBytes()) +
                                  " of modelled activations (level " + std::to_string(level) + ")" + suffix;
    }
    if ((skipNoRecompute || inside != Inside::Nothing) && !recompute) continue;
    out.push_back(std::move(c));
  }
}

// Whether some episode has values `drop` of it would recompute inside stored stages (a graph
// small enough to measure many proposals of).
template <class DropSet>
bool insidePays(const Analysis& a, const DropSet Episode::*drop) {
  if (a.numNodes > kExhaustiveMaxNodes) return false;
  for (const Episode& ep : a.episodes)
    if (!(ep.*drop).empty() && ep.model.size() >= 2) return true;
  return false;
}

// One free-recompute proposal: every episode drops its freeDrop values of tiers up to `tier`,
// of depths up to `depth` (0: any) and, with `quarter` > 0, made in the first quarter/4 of its
// forward.
Candidate freeCandidate(const Analysis& a, std::int64_t tier, int depth, int quarter) {
  Candidate c{RematStrategy::Selective,
              "selective: recompute values of at most " + std::to_string(tier) + " FLOPs per element" +
                  (depth == 1 ? ", each by one node," : "") +
                  (quarter > 0 ? " made in the first " + std::to_string(quarter) + "/4 of the forward," : "") +
                  " from what the backward keeps anyway (parameters, inputs, values it reads)",
              {}};
  for (const Episode& ep : a.episodes) {
    EpisodePlan p{EpisodePlan::Kind::Free, {}};
    p.freeTier = tier;
    p.freeDepth = depth;
    if (quarter > 0) p.freeBefore = std::max<int>(1, static_cast<int>((ep.forwardEnd - ep.forwardBegin) * quarter / 4));
    c.episodes.push_back(std::move(p));
  }
  return c;
}

// How many values a backward node reads a free-recompute proposal drops.
size_t freeDrops(const Analysis& a, const Candidate& c) {
  size_t n = 0;
  for (size_t e = 0; e < a.episodes.size(); ++e)
    for (const auto& [v, f] : a.episodes[e].freeDrop)
      if (f.readByBackward && c.episodes[e].dropsFree(f)) ++n;
  return n;
}

// Free recompute at each of kFreeTiers, of any depth and of depth 1 only: one proposal per
// distinct set of values that backward nodes read (the sets grow with the tier; depth 1 is a
// subset of any depth at the same tier). Then the last tier with only the values made in the
// first quarter, half or three quarters of the forward: they live longest, so they save most
// per FLOP.
void freeCandidates(const Analysis& a, std::vector<Candidate>& out) {
  for (int depth : {0, 1}) {
    size_t below = 0;
    for (std::int64_t tier : kFreeTiers) {
      Candidate c = freeCandidate(a, tier, depth, 0);
      const size_t n = freeDrops(a, c);
      const bool repeats = n == below || (depth == 1 && n == freeDrops(a, freeCandidate(a, tier, 0, 0)));
      below = n;
      if (!repeats) out.push_back(std::move(c));
    }
  }
  for (int depth : {0, 1})
    for (int quarter = 1; quarter <= 3; ++quarter) {
      Candidate c = freeCandidate(a, kFreeTiers[std::size(kFreeTiers) - 1], depth, quarter);
      if (freeDrops(a, c) > 0) out.push_back(std::move(c));
    }
}

// Whether free recompute would drop a value selective keeps (else its proposals repeat
// selective's). freeDrop is empty on graphs too large to measure its proposals.
bool freePays(const Analysis& a) {
  for (const Episode& ep : a.episodes)
    for (const auto& [v, f] : ep.freeDrop)
      if (!ep.selectiveDrop.count(v)) return true;
  return false;
}

// The chain length every episode shares (micro-batches repeat one chain), or 0; only for
// graphs small enough to measure many proposals of.
int sharedChainLength(const Analysis& a) {
  if (a.episodes.empty() || a.numNodes > kExhaustiveMaxNodes) return 0;
  const size_t n = a.episodes[0].model.size();
  for (const Episode& ep : a.episodes)
    if (ep.model.size() != n) return 0;
  return static_cast<int>(n);
}

// A chain proposal running one schedule in every episode.
Candidate everyEpisode(const Analysis& a, std::string description, const chain::Schedule& schedule) {
  Candidate c{RematStrategy::Chain, std::move(description), {}};
  for (size_t e = 0; e < a.episodes.size(); ++e) c.episodes.push_back(EpisodePlan{EpisodePlan::Kind::Schedule, schedule});
  return c;
}

// Short chains: every segment schedule (chain::segmentSchedule), where adjacent stored segments
// count as one. The solver is exact for its model of memory, and the model only approximates
// the scheduled liveness the choice is made on; on a chain this short, measuring every
// segmentation costs little and finds what the model misses. Every episode takes the same
// segmentation (micro-batches repeat one chain).
void exhaustiveCandidates(const Analysis& a, std::vector<Candidate>& out) {
  const int n = sharedChainLength(a);
  if (n < 2 || n > kExhaustiveStages) return;
  for (std::uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::vector<int> ends;
    for (int i = 1; i < n; ++i)
      if (cuts & (1u << (i - 1))) ends.push_back(i);
    ends.push_back(n);
    const size_t k = ends.size();
    // The last segment is stored (recomputing it right after the first pass saves nothing).
    for (std::uint32_t flags = 1; flags < (1u << (k - 1)); ++flags) {
      std::vector<char> recomputed(k, 0);
      bool canonical = true;
      for (size_t g = 0; g + 1 < k; ++g) recomputed[g] = (flags >> g) & 1u;
      for (size_t g = 0; g + 1 < k; ++g) canonical = canonical && (recomputed[g] || recomputed[g + 1]);
      if (!canonical) continue;
      // Which recomputed segments followed by a stored one drop their end boundary too.
      std::vector<size_t> optional;
      for (size_t g = 0; g + 1 < k; ++g)
        if (recomputed[g] && !recomputed[g + 1]) optional.push_back(g);
      for (std::uint32_t drops = 0; drops < (1u << optional.size()); ++drops) {
        std::vector<char> keepEnd(k, 1);
        for (size_t o = 0; o < optional.size(); ++o)
          if (drops & (1u << o)) keepEnd[optional[o]] = 0;
        std::string what;
        int lo = 0;
        for (size_t g = 0; g < k; ++g) {
          if (recomputed[g])
            what += (what.empty() ? "" : ", ") +
                    (ends[g] - lo == 1 ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(ends[g] - 1)) +
                    (keepEnd[g] ? "" : " (no checkpoint)");
          lo = ends[g];
        }
        const chain::Schedule schedule = chain::segmentSchedule(ends, recomputed, keepEnd);
        // The chain model cannot express a boundary dropped after the stored stage that reads
        // it and recomputed for that stage's backward (its simulator refuses the schedule); the
        // rewrite can, so those schedules go to measurement unsimulated.
        if (drops == 0 && !chain::simulate(a.episodes[0].model, schedule, a.episodes[0].external).ok) continue;
        out.push_back(everyEpisode(a,
                                   "chain: recompute stage" +
                                       std::string(what.find_first_of(",-") == std::string::npos ? " " : "s ") + what +
                                       " of " + std::to_string(n) + " (each group once)",
                                   schedule));
      }
    }
  }
}

// Memory-poor over a prefix, the rest stored (recompute many times where memory is scarcest,
// keep the late stages the backward needs first): two proposals per prefix length and split
// (none, or a checkpoint inside the prefix that the stages after it recompute from). And,
// without a split, the rest with every other stage recomputed once (from the first stage after
// the prefix, or the second), its boundary dropped and recomputed for the stored stage after
// it: what the exact optimum does at the 8-layer MLP's tightest budget (bench/remat_ilp.py).
// The chain model cannot express those (a boundary recomputed for the stored stage that reads
// it), so they go to measurement unsimulated.
void prefixMemoryPoorCandidates(const Analysis& a, std::vector<Candidate>& out) {
  const int n = sharedChainLength(a);
  if (n < 2 || n > kPrefixMemoryPoorStages) return;
  for (int prefix = 1; prefix < n; ++prefix)
    for (int split = 0; split < prefix; ++split)
      for (int alternate : {0, 1, 2})
        for (bool keepEnd : {true, false}) {
          if (alternate > 0 && (split > 0 || prefix + alternate >= n)) continue;
          const chain::Schedule schedule = chain::prefixMemoryPoorSchedule(n, prefix, keepEnd, split, alternate);
          if (alternate == 0 && keepEnd && !chain::simulate(a.episodes[0].model, schedule, a.episodes[0].external).ok)
            continue;
          const std::string rest = alternate == 0 ? ", the rest stored"
                                                  : ", every other stage from " + std::to_string(prefix + alternate - 1) +
                                                        " on recomputed once, the rest stored";
          out.push_back(everyEpisode(a,
                                     "chain: stages 0-" + std::to_string(prefix - 1) + " of " + std::to_string(n) +
                                         " memory-poor" +
                                         (split > 0 ? " (again from a checkpoint before stage " + std::to_string(split) + ")"
                                                    : "") +
                                         rest + (keepEnd ? "" : " (no checkpoint)"),
                                     schedule));
        }
}

// k uniform segments for k = 2 .. the chain's stages, except `skip` (the sqrt proposal's
// count, already proposed): every k up to kEverySegmentCount, then about 25% apart; only on
// graphs of at most kExhaustiveMaxNodes nodes (on larger ones each proposal costs too much to
// measure: a budget nothing fits schedules nearly every proposal).
void segmentCountCandidates(const Analysis& a, int skip, std::vector<Candidate>& out) {
  if (a.episodes.empty() || a.numNodes > kExhaustiveMaxNodes) return;
  const int n = static_cast<int>(a.episodes[0].model.size());
  auto next = [](int k) { return k < kEverySegmentCount ? k + 1 : std::max(k + 1, k * 5 / 4); };
  for (int k = 2; k <= n; k = next(k)) {
    if (k == skip) continue;
    out.push_back(scheduled(a, RematStrategy::Chain,
                            "chain: " + std::to_string(k) + " segments of " + std::to_string(n) +
                                " stages, one extra forward",
                            3, [&](const Episode& ep) { return chain::sqrtSchedule(ep.model, k); }));
  }
}

}  // namespace

std::vector<Candidate> candidates(const Analysis& a, RematStrategy strategy) {
  std::vector<Candidate> out;
  const bool all = strategy == RematStrategy::Auto;
  const int raw = a.episodes.empty() ? 0 : a.episodes[0].rawStages;
  const int sqrtSegments = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(std::max(raw, 1))))));
  auto sqrtPlan = [&](RematStrategy label) {
    const int segments = sqrtSegments;
    return scheduled(a, label, "sqrt: " + std::to_string(segments) + " segments, one extra forward", 3,
                     [&](const Episode& ep) {
                       int seg = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(std::max(ep.rawStages, 1))))));
                       return chain::sqrtSchedule(ep.model, seg);
                     });
  };
  auto poorPlan = [&](RematStrategy label) {
    return scheduled(a, label, "memory-poor: keep only the chain input", 2,
                     [](const Episode& ep) { return chain::memoryPoorSchedule(ep.model, kMemoryPoorSegments); });
  };
  if (strategy == RematStrategy::None || all)
    out.push_back(uniform(a, RematStrategy::None, "none: keep every activation", EpisodePlan::Kind::Keep));
  if (strategy == RematStrategy::Selective || all)
    out.push_back(uniform(a, RematStrategy::Selective,
                          "selective: keep matmul/linear outputs and stage boundaries, recompute cheap ops",
                          EpisodePlan::Kind::Selective));
  if (all && freePays(a)) freeCandidates(a, out);
  if (strategy == RematStrategy::Sqrt || all) out.push_back(sqrtPlan(RematStrategy::Sqrt));
  if (strategy == RematStrategy::Chain || all) {
    chainCandidates(a, all, Inside::Nothing, out);
    if (insidePays(a, &Episode::selectiveDrop)) chainCandidates(a, all, Inside::Cheap, out);
    if (all && freePays(a) && insidePays(a, &Episode::freeDrop)) chainCandidates(a, all, Inside::Free, out);
    exhaustiveCandidates(a, out);
    prefixMemoryPoorCandidates(a, out);
    // sqrt's count is sqrt of the stages before grouping; sqrtSchedule caps it at the chain's.
    const int chainStages = a.episodes.empty() ? 0 : static_cast<int>(a.episodes[0].model.size());
    segmentCountCandidates(a, std::min(sqrtSegments, chainStages), out);
  }
  if (strategy == RematStrategy::Chain) {
    // The solver is exact for the chain model, which only approximates the graph's liveness;
    // the classic schedules of the same chain are measured beside its frontier, so chain is
    // never worse than sqrt or memory-poor at any budget.
    out.push_back(sqrtPlan(RematStrategy::Chain));
    out.push_back(poorPlan(RematStrategy::Chain));
  }
  if (strategy == RematStrategy::MemoryPoor || all) out.push_back(poorPlan(RematStrategy::MemoryPoor));
  return out;
}

bool freeRecomputePays(const Analysis& a) { return freePays(a); }

Candidate segmentsCandidate(const Analysis& a, int segments) {
  return scheduled(a, RematStrategy::Sqrt, "checkpoint_sequential: " + std::to_string(segments) + " segments", 3,
                   [&](const Episode& ep) { return chain::sqrtSchedule(ep.model, segments); });
}

}  // namespace remat
}  // namespace gradc::passes
