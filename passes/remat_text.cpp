// The text side of remat's results: the strategy table of gradc compile --emit summary
// (passes/remat.h).
#include "passes/remat.h"

#include <cstdio>
#include <string>

#include "passes/budget.h"

namespace gradc::passes {

std::string formatStrategySummaries(std::span<const StrategySummary> rows) {
  std::string out = "strategy       predicted peak   recompute (% of forward)   saved        plan\n";
  for (const StrategySummary& r : rows) {
    char line[512];
    std::string peak = formatBytes(r.predictedPeakBytes) + (r.fits ? "" : " (min)");
    std::snprintf(line, sizeof line, "%-14s %-16s %8.1f%%                  %-12s %s%s\n",
                  std::string(rematStrategyName(r.strategy)).c_str(), peak.c_str(), r.recomputePercent,
                  formatBytes(r.savedBytes).c_str(), r.fits ? "" : "does not fit; ", r.plan.c_str());
    out += line;
  }
  return out;
}

}  // namespace gradc::passes
