// torch.utils.checkpoint.checkpoint_sequential's segment choices on a training step without
// recompute, each planned by gradc's rewrite and measured on the scheduled step: what the bench
// tools that compare against it (remat_curve, remat_ilp_export) share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/remat_strategies.h"
#include "passes/schedule.h"

namespace gradc::bench {

struct SegmentPoint {
  int segments = 0;
  std::string plan;  // the proposal's description
  std::int64_t peak = 0;
  std::int64_t recomputeFlops = 0;
};

// k segments for every k up to 16, then about 1.5x apart, and the chain's stage count. `g` is
// rewritten and restored for each.
inline std::vector<SegmentPoint> checkpointSequentialPoints(ir::Graph& g, const passes::remat::Analysis& a) {
  const int stages = a.episodes.empty() ? 0 : a.episodes[0].rawStages;
  std::vector<int> counts;
  for (int k = 1; k <= stages; k = k < 16 ? k + 1 : k * 3 / 2) counts.push_back(k);
  if (!counts.empty() && counts.back() != stages) counts.push_back(stages);
  std::vector<SegmentPoint> points;
  for (int k : counts) {
    const passes::remat::Candidate c = passes::remat::segmentsCandidate(a, k);
    const passes::RewritePlan p = passes::remat::planRewrite(a, c);
    const passes::remat::AppliedRewrite applied = passes::remat::applyRewrite(g, p);
    const std::int64_t peak = passes::scheduledPeakBytes(g);
    passes::remat::undoRewrite(g, applied);
    points.push_back({k, c.description, peak, p.recomputeFlops});
  }
  return points;
}

}  // namespace gradc::bench
