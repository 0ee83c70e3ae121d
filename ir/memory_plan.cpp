#include "ir/memory_plan.h"

#include <algorithm>
#include <array>
#include <utility>

namespace gradc::ir {

namespace {

constexpr std::array<std::pair<BufferKind, std::string_view>, 9> kKindNames{{
    {BufferKind::Param, "param"},
    {BufferKind::OptState, "opt_state"},
    {BufferKind::Input, "input"},
    {BufferKind::Activation, "activation"},
    {BufferKind::Gradient, "grad"},
    {BufferKind::Optimizer, "optimizer"},
    {BufferKind::Recompute, "recompute"},
    {BufferKind::Comm, "comm"},
    {BufferKind::Workspace, "workspace"},
}};

}  // namespace

std::string_view bufferKindName(BufferKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return name;
  return "?";
}

std::optional<BufferKind> parseBufferKind(std::string_view name) {
  for (const auto& [k, n] : kKindNames)
    if (n == name) return k;
  return std::nullopt;
}

std::string_view memorySpaceName(MemorySpace) { return "device"; }

std::optional<MemorySpace> parseMemorySpace(std::string_view name) {
  if (name == "device") return MemorySpace::Device;
  return std::nullopt;
}

std::string_view residencyName(Residency residency) {
  return residency == Residency::Persistent ? "persistent" : "step";
}

std::optional<Residency> parseResidency(std::string_view name) {
  if (name == "persistent") return Residency::Persistent;
  if (name == "step") return Residency::Step;
  return std::nullopt;
}

Residency defaultResidency(BufferKind kind) {
  return kind == BufferKind::Param || kind == BufferKind::OptState || kind == BufferKind::Input ? Residency::Persistent
                                                                                                : Residency::Step;
}

double MemoryPlan::fragmentation() const {
  return peakBytes > 0 ? static_cast<double>(arenaBytes) / static_cast<double>(peakBytes) : 1.0;
}

std::vector<size_t> MemoryPlan::liveAt(int step) const {
  std::vector<size_t> live;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].firstStep <= step && step <= buffers[i].lastStep && buffers[i].size > 0) live.push_back(i);
  std::stable_sort(live.begin(), live.end(), [&](size_t a, size_t b) { return buffers[a].size > buffers[b].size; });
  return live;
}

}  // namespace gradc::ir
