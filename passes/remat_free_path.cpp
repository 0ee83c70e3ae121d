#include "passes/remat_free_path.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "passes/schedule.h"

namespace gradc::passes::remat {

namespace {

// A free value of some episode, with what the choice weighs.
struct Item {
  int episode;
  int index;  // Episode::FreeValue::index
  const ir::Value* value;
  std::int64_t flops;  // its producer's
  int position;        // Episode::FreeValue::position
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

// Whether dropping the item could lower m's peak: its own storage is made before the peak
// step, read after it, and not by the node at it.
bool heldAcrossPeak(const Measured& m, const Item& item) {
  const StepGraph& g = m.step;
  const size_t id = item.value->id();
  if (id >= g.valueGroup.size() || g.valueGroup[id] < 0) return false;
  const auto group = static_cast<size_t>(g.valueGroup[id]);
  const int producer = g.groupProducer[group];
  if (g.nodes[static_cast<size_t>(producer)] != item.value->producer() || g.has(producer, kStepRecompute)) return false;
  if (g.groupPinned[group] || m.at[static_cast<size_t>(producer)] >= m.peak.step) return false;
  int last = -1;
  bool readAtPeak = false;
  for (int u : g.groupUsers[group]) {
    last = std::max(last, m.at[static_cast<size_t>(u)]);
    readAtPeak = readAtPeak || m.at[static_cast<size_t>(u)] == m.peak.step;
  }
  return last > m.peak.step && !readAtPeak;
}

// a saves more bytes per FLOP than b (zero-FLOP values first); ties to the smaller (finer
// steps: four layer norms' outputs before one GELU's four times as large, at the same cost per
// byte), then to the earlier.
bool better(const Measured& m, const Item& a, const Item& b) {
  const auto bytes = [&](const Item& i) {
    return static_cast<__int128>(m.step.groupBytes[static_cast<size_t>(m.step.valueGroup[i.value->id()])]);
  };
  if ((a.flops == 0) != (b.flops == 0)) return a.flops == 0;
  const __int128 lhs = bytes(a) * std::max<std::int64_t>(b.flops, 1), rhs = bytes(b) * std::max<std::int64_t>(a.flops, 1);
  if (lhs != rhs) return lhs > rhs;
  if (bytes(a) != bytes(b)) return bytes(a) < bytes(b);
  if (a.position != b.position) return a.position < b.position;
  return a.episode != b.episode ? a.episode < b.episode : a.index < b.index;
}

}  // namespace

std::vector<Candidate> freePathCandidates(const Analysis& a, const StepFacts& facts) {
  std::vector<Candidate> out;
  if (a.numNodes > kExhaustiveMaxNodes) return out;
  std::vector<Item> items;
  std::vector<std::vector<char>> chosen;
  for (size_t e = 0; e < a.episodes.size(); ++e) {
    const Episode& ep = a.episodes[e];
    chosen.emplace_back(ep.freeDrop.size(), 0);
    for (const auto& [v, f] : ep.freeDrop)
      items.push_back(Item{static_cast<int>(e), f.index, v, a.flopsOf(v->producer()), f.position});
  }
  if (items.empty()) return out;
  // A fixed order of the items (the map's is not), so that ties resolve the same every time.
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return x.episode != y.episode ? x.episode < y.episode : x.index < y.index;
  });

  auto flag = [&](const Item& item) -> char& {
    return chosen[static_cast<size_t>(item.episode)][static_cast<size_t>(item.index)];
  };
  std::vector<char> tried(items.size(), 0);
  int dropped = 0;
  Measured current = measure(a, facts, proposal(a, chosen, 0, 0));
  for (;;) {
    std::optional<size_t> pick;
    for (size_t i = 0; i < items.size(); ++i)
      if (!tried[i] && heldAcrossPeak(current, items[i]) && (!pick || better(current, items[i], items[*pick])))
        pick = i;
    if (!pick) break;
    tried[*pick] = 1;
    flag(items[*pick]) = 1;
    Candidate next = proposal(a, chosen, dropped + 1, 0);
    Measured after = measure(a, facts, next);
    if (after.peak.bytes > current.peak.bytes) {
      flag(items[*pick]) = 0;
      continue;
    }
    ++dropped;
    out.push_back(std::move(next));
    current = std::move(after);
  }
  // The end of the path without the values its peak does without, most FLOPs first.
  std::vector<size_t> kept;
  for (size_t i = 0; i < items.size(); ++i)
    if (flag(items[i])) kept.push_back(i);
  std::stable_sort(kept.begin(), kept.end(), [&](size_t x, size_t y) {
    return items[x].flops != items[y].flops ? items[x].flops > items[y].flops : items[x].position > items[y].position;
  });
  int pruned = 0;
  for (size_t i : kept) {
    flag(items[i]) = 0;
    if (measure(a, facts, proposal(a, chosen, dropped - pruned - 1, 0)).peak.bytes > current.peak.bytes)
      flag(items[i]) = 1;
    else
      ++pruned;
  }
  if (pruned > 0) out.push_back(proposal(a, chosen, dropped - pruned, pruned));
  return out;
}

}  // namespace gradc::passes::remat
