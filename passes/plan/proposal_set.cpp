#include "passes/plan/proposal_set.h"

#include <algorithm>
#include <limits>

namespace gradc::passes::search {

// Whether firstFit takes the entry under `budget`: its scheduled peak fits. A proposal that
// does not fit at its finest chunking fits at no coarser one: it is skipped without measuring
// the coarser.
bool fitsUnder(ProposalSet& proposals, const Proposal& e, std::int64_t budget) {
  if (!proposals.isFinest(e) && !proposals.fits(proposals.finest(e), budget)) return false;
  return proposals.fits(e, budget) && proposals.peak(e) <= budget;
}

// The first entry in selection order that fits.
std::optional<Proposal> firstFit(ProposalSet& proposals, const std::vector<Proposal>& order, std::int64_t budget) {
  for (const Proposal& e : order)
    if (fitsUnder(proposals, e, budget)) return e;
  return std::nullopt;
}

// The least scheduled peak over the finest chunking of each proposal (the coarser ones never
// reach a smaller one). Proposals are scheduled in order of their lower bounds, and the search
// stops at the first bound no smaller than the best peak found: none after it can beat it.
// Ties keep the earliest entry in selection order.
// A proposal whose lower bound is below every program-order peak measured so far is scheduled
// while its step graph is built for the bounds, instead of building it a second time below:
// such a proposal can still be the smallest, and the search usually schedules it.
std::optional<Proposal> smallestPeak(ProposalSet& proposals, const std::vector<Proposal>& order) {
  std::vector<size_t> byBound;
  for (size_t i = 0; i < order.size(); ++i)
    if (proposals.isFinest(order[i])) byBound.push_back(i);
  std::int64_t leastProgramOrder = std::numeric_limits<std::int64_t>::max();
  for (size_t i : byBound) {
    const PeakFacts f = proposals.measure(order[i], [&](const PeakFacts& facts) {
      return facts.lowerBound <= std::min(leastProgramOrder, facts.programOrder);
    });
    leastProgramOrder = std::min(leastProgramOrder, f.programOrder);
  }
  std::stable_sort(byBound.begin(), byBound.end(), [&](size_t a, size_t b) {
    return proposals.bounds(order[a]).lowerBound < proposals.bounds(order[b]).lowerBound;
  });
  std::optional<size_t> best;
  for (size_t i : byBound) {
    if (best && proposals.bounds(order[i]).lowerBound > proposals.peak(order[*best])) break;
    const std::int64_t p = proposals.peak(order[i]);
    if (!best || p < proposals.peak(order[*best]) || (p == proposals.peak(order[*best]) && i < *best)) best = i;
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
std::optional<Proposal> firstFitNearFloor(ProposalSet& proposals, const std::vector<Proposal>& order) {
  auto plus5 = [](std::int64_t bytes) { return bytes + bytes / 20; };
  std::int64_t floor = std::numeric_limits<std::int64_t>::max();
  for (const Proposal& e : order)  // the same at every chunking of a graph
    if (proposals.isFinest(e)) floor = std::min(floor, proposals.floorBytes(e));
  for (size_t i = 0; i < order.size(); ++i) {
    if (!fitsUnder(proposals, order[i], plus5(floor))) continue;
    const std::int64_t atMost = plus5(proposals.peak(proposals.finest(order[i])));
    for (size_t j = 0; j < i; ++j)
      if (fitsUnder(proposals, order[j], atMost)) return std::nullopt;
    return order[i];
  }
  return std::nullopt;
}

// The plan a strategy applies without a budget: chain takes the least recompute that comes
// within 5% of its smallest peak (memory-poor reaches the very smallest at many times the
// cost); the others their one plan (auto and none: nothing recomputed).
std::optional<Proposal> withoutBudget(ProposalSet& proposals, const std::vector<Proposal>& order, RematStrategy strategy) {
  if (order.empty()) return std::nullopt;
  if (strategy != RematStrategy::Chain) return order.front();
  if (std::optional<Proposal> settled = firstFitNearFloor(proposals, order)) return settled;
  const std::int64_t lowest = proposals.peak(*smallestPeak(proposals, order));
  return firstFit(proposals, order, lowest + lowest / 20);
}

}  // namespace gradc::passes::search
