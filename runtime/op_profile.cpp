#include "runtime/op_profile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace gradc::runtime {

void OpProfile::add(const ir::Node& node, std::chrono::nanoseconds elapsed) {
  Entry& e = byNode_[&node];
  ++e.calls;
  e.ns += elapsed.count();
}

void OpProfile::addStep(double seconds) {
  ++steps_;
  stepSeconds_ += seconds;
}

std::string OpProfile::format(int top) const {
  std::map<std::string, Entry> byOp;  // "matmul (bwd)"
  for (const auto& [node, e] : byNode_) {
    Entry& agg = byOp[std::string(node->opName()) + " (" + std::string(ir::phaseName(node->phase())) + ")"];
    agg.calls += e.calls;
    agg.ns += e.ns;
  }
  std::vector<std::pair<std::string, Entry>> rows(byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::int64_t kernelNs = 0;
  for (const auto& [name, e] : rows) kernelNs += e.ns;
  const double steps = std::max<std::int64_t>(steps_, 1);
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "profile over %lld steps: %.1f ms per step, %.1f ms of it in kernels\n",
                static_cast<long long>(steps_), stepSeconds_ * 1e3 / steps, kernelNs / 1e6 / steps);
  out += line;
  std::snprintf(line, sizeof line, "  %-34s %10s %12s %8s\n", "op (phase)", "calls/step", "ms/step", "share");
  out += line;
  int shown = 0;
  for (const auto& [name, e] : rows) {
    if (shown++ == top) break;
    std::snprintf(line, sizeof line, "  %-34s %10.1f %12.2f %7.1f%%\n", name.c_str(), e.calls / steps,
                  e.ns / 1e6 / steps, kernelNs > 0 ? 100.0 * static_cast<double>(e.ns) / static_cast<double>(kernelNs) : 0.0);
    out += line;
  }
  if (static_cast<int>(rows.size()) > top) {
    std::snprintf(line, sizeof line, "  ... and %zu more op kinds\n", rows.size() - static_cast<size_t>(top));
    out += line;
  }
  return out;
}

}  // namespace gradc::runtime
