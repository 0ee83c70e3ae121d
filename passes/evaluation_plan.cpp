#include "passes/evaluation_plan.h"

#include <algorithm>
#include <unordered_map>

namespace gradc::passes {

namespace {

std::int64_t aligned(std::int64_t bytes) { return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment; }

}  // namespace

Expected<EvaluationPlan> planEvaluationInside(const ir::Graph& eval, const MemoryPlan& host) {
  EvaluationPlan out;
  out.plan = planMemory(eval);
  MemoryPlan& plan = out.plan;

  std::unordered_map<std::string, const PlannedBuffer*> hostPersistent;
  std::int64_t hostEnd = 0;
  for (const PlannedBuffer& b : host.buffers)
    if (b.persistent()) {
      hostPersistent.emplace(b.name, &b);
      hostEnd = std::max(hostEnd, b.offset + aligned(b.size));
    }

  // Shared buffers keep the host's offsets; the others are placed again above hostEnd.
  std::vector<size_t> others;
  std::vector<Interval> intervals;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    PlannedBuffer& b = plan.buffers[i];
    const bool persistent = b.persistent();
    if (persistent) {
      auto it = hostPersistent.find(b.name);
      if (it != hostPersistent.end() && it->second->kind == b.kind && it->second->type == b.type &&
          it->second->size == b.size) {
        b.offset = it->second->offset;
        out.sharedBytes += b.size;
        continue;
      }
      if (b.kind != BufferKind::Input)
        return Error{"the evaluation step reads " + std::string(ir::bufferKindName(b.kind)) + " " + b.name + " (" + b.type +
                     "), which the training step does not hold"};
    }
    others.push_back(i);
    intervals.push_back({aligned(b.size), persistent ? -1 : b.firstStep, b.lastStep});
  }
  std::vector<std::int64_t> offsets;
  const std::int64_t extent = assignOffsets(intervals, offsets);
  for (size_t j = 0; j < others.size(); ++j) plan.buffers[others[j]].offset = hostEnd + offsets[j];
  out.arenaBytes = std::max(host.arenaBytes, hostEnd + extent);
  plan.arenaBytes = out.arenaBytes;

  // What the device holds while evaluation runs: the host's persistent bytes, and the
  // evaluation's own beyond the shared ones.
  const std::int64_t shift = host.persistentBytes - out.sharedBytes;
  for (std::int64_t& live : plan.timeline) live += shift;
  plan.peakBytes += shift;
  plan.persistentBytes += shift;
  plan.budgetBytes = host.budgetBytes;
  plan.reserveBytes = host.reserveBytes;
  plan.ranks.assign(1, {0, plan.peakBytes, plan.arenaBytes});

  if (Status s = verifyNoOverlap(plan); !s) return s.error().withContext("evaluation plan: ");
  for (const PlannedBuffer& b : plan.buffers) {
    if (hostPersistent.count(b.name) && hostPersistent.at(b.name)->offset == b.offset) continue;
    for (const auto& [name, h] : hostPersistent)
      if (b.offset < h->offset + h->size && h->offset < b.offset + b.size)
        return Error{"evaluation plan: buffer " + b.name + " overlaps the training step's " + name};
  }
  return out;
}

}  // namespace gradc::passes
