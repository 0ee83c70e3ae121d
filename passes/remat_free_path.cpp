#include "passes/remat_free_path.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "passes/schedule.h"

namespace gradc::passes::remat {

namespace {

// A free value, or with micro-batches the same free value of every episode (they repeat one
// forward, so a plan drops it in all of them, as the other proposals do), with what the choice
// weighs.
struct Item {
  int index;  // Episode::FreeValue::index
  std::vector<std::pair<int, const ir::Value*>> members;  // (episode, value)
  std::int64_t flops;  // its producers'
  int position;        // Episode::FreeValue::position (the first member's)
};

// One measured set: the scheduled order of its step graph and where it peaks.
struct Measured {
  StepGraph step;
  std::vector<int> at;  // by node index: its place in the order
  StepPeak peak;
};

// `pruned`: how many values the path's end dropped that this set keeps (0: a step of the path).
Candidate proposal(const Analysis& a, const std::vector<std::vector<char>>& chosen, int dropped, int pruned) {
  Candidate c{RematStrategy::Selective,
              "selective: recompute " + std::to_string(dropped) +
                  " cheap values chosen one by one where the scheduled step peaks" +
                  (pruned > 0 ? " (the path's end less " + std::to_string(pruned) + " it does without)" : "") +
                  ", from what the backward keeps anyway",
              {}};
  for (size_t e = 0; e < a.episodes.size(); ++e) {
    EpisodePlan p{EpisodePlan::Kind::Free, {}};
    p.freeChosen = std::make_shared<const std::vector<char>>(chosen[e]);
    c.episodes.push_back(std::move(p));
  }
  return c;
}

Measured measure(const Analysis& a, const StepFacts& facts, const Candidate& c) {
  const RewritePlan plan = planRewrite(a, c);
  Measured m{buildStepGraph(facts, &plan), {}, {}};
  const std::vector<int> order = scheduleOrder(m.step, &m.peak);
  m.at.assign(m.step.size(), 0);
  for (size_t s = 0; s < order.size(); ++s) m.at[static_cast<size_t>(order[s])] = static_cast<int>(s);
  return m;
}

// The bytes dropping the item could take off m's peak: those of its members whose own storage
// (views save nothing) is made before the peak step, read after it, and not by the node at it.
std::int64_t heldAcrossPeak(const Measured& m, const Item& item) {
  const StepGraph& g = m.step;
  std::int64_t bytes = 0;
  for (const auto& [episode, value] : item.members) {
    const size_t id = value->id();
    if (id >= g.valueGroup.size() || g.valueGroup[id] < 0) continue;
    const auto group = static_cast<size_t>(g.valueGroup[id]);
    const int producer = g.groupProducer[group];
    if (g.nodes[static_cast<size_t>(producer)] != value->producer()) continue;  // a view of another's storage
    if (g.groupPinned[group] || m.at[static_cast<size_t>(producer)] >= m.peak.step) continue;
    int last = -1;
    bool readAtPeak = false;
    for (int u : g.groupUsers[group]) {
      last = std::max(last, m.at[static_cast<size_t>(u)]);
      readAtPeak = readAtPeak || m.at[static_cast<size_t>(u)] == m.peak.step;
    }
    if (last > m.peak.step && !readAtPeak) bytes += g.groupBytes[group];
  }
  return bytes;
}

// Item a (`bytes` held across the peak) saves more per FLOP than b (zero-FLOP values first);
// ties to the smaller (finer steps: four layer norms' outputs before one GELU's four times as
// large, at the same cost per byte), then to the earlier.
bool better(const Item& a, std::int64_t aBytes, const Item& b, std::int64_t bBytes) {
  if ((a.flops == 0) != (b.flops == 0)) return a.flops == 0;
  const __int128 lhs = static_cast<__int128>(aBytes) * std::max<std::int64_t>(b.flops, 1);
  const __int128 rhs = static_cast<__int128>(bBytes) * std::max<std::int64_t>(a.flops, 1);
  if (lhs != rhs) return lhs > rhs;
  if (aBytes != bBytes) return aBytes < bBytes;
  if (a.position != b.position) return a.position < b.position;
  return a.index < b.index;
}

}  // namespace

std::vector<Candidate> freePathCandidates(const Analysis& a, const StepFacts& facts) {
  std::vector<Candidate> out;
  if (a.numNodes > kExhaustiveMaxNodes) return out;
  std::vector<std::vector<char>> chosen;
  std::vector<std::vector<std::pair<const ir::Value*, const Episode::FreeValue*>>> byIndex;
  for (const Episode& ep : a.episodes) {
    chosen.emplace_back(ep.freeDrop.size(), 0);
    byIndex.emplace_back(ep.freeDrop.size());
    for (const auto& [v, f] : ep.freeDrop) byIndex.back()[static_cast<size_t>(f.index)] = {v, &f};
  }
  // One item per index across the episodes when they all have the same free values (the same
  // ops at the same indices), else one per value.
  bool repeated = true;
  for (size_t e = 1; e < byIndex.size() && repeated; ++e) {
    repeated = byIndex[e].size() == byIndex[0].size();
    for (size_t i = 0; i < byIndex[e].size() && repeated; ++i)
      repeated = &byIndex[e][i].first->producer()->op() == &byIndex[0][i].first->producer()->op();
  }
  std::vector<Item> items;
  for (size_t e = 0; e < byIndex.size(); ++e)
    for (size_t i = 0; i < byIndex[e].size(); ++i) {
      const auto& [v, f] = byIndex[e][i];
      if (repeated && e > 0) {
        items[i].members.push_back({static_cast<int>(e), v});
        items[i].flops += a.flopsOf(v->producer());
        continue;
      }
      items.push_back(Item{f->index, {{static_cast<int>(e), v}}, a.flopsOf(v->producer()), f->position});
    }
  if (items.empty()) return out;

  auto set = [&](const Item& item, char on) {
    for (const auto& [episode, value] : item.members) chosen[static_cast<size_t>(episode)][static_cast<size_t>(item.index)] = on;
  };
  auto isSet = [&](const Item& item) {
    return chosen[static_cast<size_t>(item.members[0].first)][static_cast<size_t>(item.index)] != 0;
  };
  std::vector<char> tried(items.size(), 0);
  int dropped = 0;
  Measured current = measure(a, facts, proposal(a, chosen, 0, 0));
  for (;;) {
    std::optional<size_t> pick;
    std::int64_t pickBytes = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (tried[i]) continue;
      const std::int64_t bytes = heldAcrossPeak(current, items[i]);
      if (bytes > 0 && (!pick || better(items[i], bytes, items[*pick], pickBytes))) {
        pick = i;
        pickBytes = bytes;
      }
    }
    if (!pick) break;
    tried[*pick] = 1;
    set(items[*pick], 1);
    Candidate next = proposal(a, chosen, dropped + 1, 0);
    Measured after = measure(a, facts, next);
    if (after.peak.bytes > current.peak.bytes) {
      set(items[*pick], 0);
      continue;
    }
    ++dropped;
    out.push_back(std::move(next));
    current = std::move(after);
  }
  // The end of the path without the values its peak does without, most FLOPs first.
  std::vector<size_t> kept;
  for (size_t i = 0; i < items.size(); ++i)
    if (isSet(items[i])) kept.push_back(i);
  std::stable_sort(kept.begin(), kept.end(), [&](size_t x, size_t y) {
    return items[x].flops != items[y].flops ? items[x].flops > items[y].flops : items[x].position > items[y].position;
  });
  int pruned = 0;
  for (size_t i : kept) {
    set(items[i], 0);
    if (measure(a, facts, proposal(a, chosen, dropped - pruned - 1, 0)).peak.bytes > current.peak.bytes)
      set(items[i], 1);
    else
      ++pruned;
  }
  if (pruned > 0) out.push_back(proposal(a, chosen, dropped - pruned, pruned));
  return out;
}

std::vector<Candidate> candidatesWithFreePath(const Analysis& analysis, RematStrategy strategy,
                                              const StepFacts* measureOn) {
  std::vector<Candidate> out = candidates(analysis, strategy);
  if (strategy == RematStrategy::Auto && measureOn && freeRecomputePays(analysis))
    for (Candidate& c : freePathCandidates(analysis, *measureOn)) out.push_back(std::move(c));
  return out;
}

}  // namespace gradc::passes::remat
