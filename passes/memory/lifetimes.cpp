#include "passes/memory/lifetimes.h"

#include <algorithm>
#include <numeric>

namespace gradc::passes {

namespace {

// The sweep itself; `out` (optional) keeps the group intervals and the per-step live bytes.
StepPeak sweep(const StepGraph& g, std::span<const int> order, LiveSweep* out) {
  const size_t steps = order.size();
  StepPeak peak{g.persistentBytes, 0};
  if (out) {
    out->groupFirst.assign(g.groupBytes.size(), 0);
    out->groupLast.assign(g.groupBytes.size(), 0);
    out->liveBytes.assign(steps, 0);
  }
  if (steps == 0) return peak;
  std::vector<int> at(g.size(), 0);
  for (size_t s = 0; s < steps; ++s) at[static_cast<size_t>(order[s])] = static_cast<int>(s);
  // Difference array over steps: +bytes at the allocating step, -bytes after the last one.
  std::vector<std::int64_t> delta(steps + 1, 0);
  for (size_t grp = 0; grp < g.groupBytes.size(); ++grp) {
    const int first = at[static_cast<size_t>(g.groupProducer[grp])];
    int last = first;
    if (g.groupPinned[grp]) last = static_cast<int>(steps) - 1;
    else
      for (int u : g.groupUsers[grp]) last = std::max(last, at[static_cast<size_t>(u)]);
    delta[static_cast<size_t>(first)] += g.groupBytes[grp];
    delta[static_cast<size_t>(last) + 1] -= g.groupBytes[grp];
    if (out) {
      out->groupFirst[grp] = first;
      out->groupLast[grp] = last;
    }
  }
  std::int64_t running = g.persistentBytes;
  for (size_t s = 0; s < steps; ++s) {
    running += delta[s];
    const std::int64_t live = running + g.workspace[static_cast<size_t>(order[s])];
    if (out) out->liveBytes[s] = live;
    if (live > peak.bytes) peak = StepPeak{live, static_cast<int>(s)};
  }
  return peak;
}

}  // namespace

LiveSweep liveSweep(const StepGraph& graph, std::span<const int> order) {
  LiveSweep out;
  out.peak = sweep(graph, order, &out);
  return out;
}

StepPeak stepPeak(const StepGraph& graph, std::span<const int> order) { return sweep(graph, order, nullptr); }

std::vector<int> programOrder(const StepGraph& g) {
  std::vector<int> order(g.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

}  // namespace gradc::passes
