#include "tools/summary_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace gradc::tools {

namespace {
std::string scaled(double v, const char* const* units, int n, double base) {
  int u = 0;
  while (u + 1 < n && v >= base) {
    v /= base;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", v, units[0]) : fmt::format("{:.2f} {}", v, units[u]);
}
}  // namespace

std::string formatFlops(std::int64_t flops) {
  static const char* const units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  return scaled(static_cast<double>(flops), units, 6, 1000.0);
}

std::string formatSummary(const ir::Graph& graph, const passes::GraphStats& s) {
  std::string out;
  const ir::AttrMap& attrs = graph.attrs();
  std::string model = ir::getString(attrs, "model").value_or(graph.name());
  out += fmt::format("model        {} ({} IR nodes)\n", model, s.nodes);
  std::string inputs;
  for (const auto& in : graph.inputs())
    inputs += (inputs.empty() ? "" : ", ") + in->name() + " " + ir::toString(in->type());
  out += fmt::format("inputs       {}  ({} per step)\n", inputs.empty() ? "none" : inputs, formatBytes(s.inputBytes));
  out += fmt::format("parameters   {} in {} tensors ({})", formatCount(s.paramCount), s.paramTensors,
                     formatBytes(s.paramBytes));
  if (s.stateCount > 0)
    out += fmt::format("; state {} elements ({})", formatCount(s.stateCount), formatBytes(s.stateBytes));
  out += "\n";
  out += fmt::format("FLOPs        forward {}; training step {}{}\n", formatFlops(s.forwardFlops),
                     formatFlops(s.trainingStepFlops()),
                     s.backwardEstimated ? " (backward estimated as 2x forward: the graph has no backward yet)" : "");
  out += fmt::format("activations  {} in forward results (all kept for backward when nothing is recomputed)\n",
                     formatBytes(s.activationBytes));
  if (s.maxWorkspaceBytes > 0)
    out += fmt::format("workspace    largest kernel temporary {} in {}\n", formatBytes(s.maxWorkspaceBytes),
                       s.maxWorkspaceNode);
  for (const ir::GraphOutput& o : graph.outputs())
    out += fmt::format("output       {} : {}\n", o.name, ir::toString(o.value->type()));

  out += "\nactivation classes, largest first (a class = one role repeated across blocks):\n";
  out += fmt::format("  {:>10}  {:>6}  {:>10}  {:>15}  {:<24}  {:<14}  {}\n", "total", "count", "each", "elements each",
                     "type", "op", "spec name");
  for (const passes::ActivationClass& c : s.activationClasses)
    out += fmt::format("  {:>10}  {:>6}  {:>10}  {:>15}  {:<24}  {:<14}  {}\n", formatBytes(c.totalBytes()), c.count,
                       formatBytes(c.type.bytes()), formatCount(c.type.numel()), ir::toString(c.type), c.op,
                       c.specPattern.empty() ? "-" : c.specPattern);
  return out;
}

}  // namespace gradc::tools
