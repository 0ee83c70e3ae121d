// The text side of remat's results: reading the smallest feasible budget back out of a
// refusal, and the strategy table of gradc compile --emit summary (passes/remat.h).
#include "passes/remat.h"

#include <cstdio>
#include <string>

#include "passes/budget.h"

namespace gradc::passes {

std::optional<std::int64_t> smallestFeasibleBudget(std::string_view error) {
  const size_t at = error.find(kSmallestFeasiblePhrase);
  if (at == std::string_view::npos) return std::nullopt;
  // "12.0 MiB (12,582,912 bytes)", or "512 B" below a KiB (formatBytesExact).
  std::string_view rest = error.substr(at + kSmallestFeasiblePhrase.size());
  rest = rest.substr(0, rest.find(", reached"));
  if (const size_t open = rest.find('('); open != std::string_view::npos) rest = rest.substr(open + 1);
  std::int64_t bytes = 0;
  bool any = false;
  for (char c : rest) {
    if (c == ',') continue;
    if (c < '0' || c > '9') break;
    bytes = bytes * 10 + (c - '0');
    any = true;
  }
  if (!any) return std::nullopt;
  return bytes;
}

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
