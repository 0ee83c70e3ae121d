#include "passes/memory/memory_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/arena_overlap.h"
#include "ir/printer.h"
#include "passes/fuse_loss.h"
#include "passes/memory/liveness.h"

namespace gradc::passes {

namespace {

// Free gaps of the arena, by offset (for coalescing) and by (size, offset) (for best fit).
class FreeList {
 public:
  // The offset of a gap of at least `size` bytes, the smallest such gap (lowest offset among
  // equals); the arena grows when none fits.
  std::int64_t allocate(std::int64_t size) {
    auto fit = bySize_.lower_bound({size, 0});
    if (fit != bySize_.end()) {
      auto [gapSize, offset] = *fit;
      take(offset, gapSize);
      if (gapSize > size) put(offset + size, gapSize - size);
      return offset;
    }
    // Grow: reuse a free gap that ends at the arena's end.
    if (!byOffset_.empty()) {
      auto last = std::prev(byOffset_.end());
      if (last->first + last->second == end_) {
        std::int64_t offset = last->first;
        take(offset, last->second);
        end_ = offset + size;
        return offset;
      }
    }
    std::int64_t offset = end_;
    end_ += size;
    return offset;
  }

  void release(std::int64_t offset, std::int64_t size) {
    auto next = byOffset_.lower_bound(offset);
    if (next != byOffset_.end() && offset + size == next->first) {
      size += next->second;
      take(next->first, next->second);
    }
    auto after = byOffset_.lower_bound(offset);
    if (after != byOffset_.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        take(prev->first, prev->second);
      }
    }
    put(offset, size);
  }

  std::int64_t end() const { return end_; }
  void setEnd(std::int64_t end) { end_ = end; }

 private:
  void put(std::int64_t offset, std::int64_t size) {
    byOffset_.emplace(offset, size);
    bySize_.insert({size, offset});
  }
  void take(std::int64_t offset, std::int64_t size) {
    byOffset_.erase(offset);
    bySize_.erase({size, offset});
  }

  std::map<std::int64_t, std::int64_t> byOffset_;
  std::set<std::pair<std::int64_t, std::int64_t>> bySize_;
  std::int64_t end_ = 0;
};

// A parameter's layer: its name without the last component ("blocks.0.fc1.weight" ->
// "blocks.0.fc1"); optimizer state names the layer of the parameter it belongs to.
std::string layerOfParam(const ir::Value& v) {
  std::string name = ir::getString(v.attrs(), "of").value_or(v.name());
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

}  // namespace

std::int64_t assignOffsets(const std::vector<Interval>& intervals, std::vector<std::int64_t>& offsets) {
  std::int64_t arena = assignOffsetsBestFit(intervals, offsets);
  if (intervals.size() > kGreedyBySizeLimit) return arena;
  std::vector<std::int64_t> bySize;
  std::int64_t arenaBySize = assignOffsetsBySize(intervals, bySize);
  if (arenaBySize < arena) {
    offsets = std::move(bySize);
    arena = arenaBySize;
  }
  return arena;
}

std::int64_t assignOffsetsBySize(const std::vector<Interval>& intervals, std::vector<std::int64_t>& offsets) {
  offsets.assign(intervals.size(), 0);
  std::int64_t base = 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (intervals[i].first == -1) {
      offsets[i] = base;
      base += intervals[i].size;
    } else if (intervals[i].size > 0) {
      order.push_back(i);
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (intervals[a].size != intervals[b].size) return intervals[a].size > intervals[b].size;
    if (intervals[a].first != intervals[b].first) return intervals[a].first < intervals[b].first;
    return a < b;
  });
  // Placed buffers sorted by offset, as flat arrays for a fast scan.
  struct Placed {
    std::int64_t offset, end;
    int first, last;
  };
  std::vector<Placed> placed;
  placed.reserve(order.size());
  std::int64_t arena = base;
  for (size_t i : order) {
    const Interval& b = intervals[i];
    std::int64_t prevEnd = base, best = -1, bestGap = 0;
    for (const Placed& p : placed) {
      if (p.last < b.first || b.last < p.first) continue;  // not alive at a common step
      std::int64_t gap = p.offset - prevEnd;
      if (gap >= b.size && (best < 0 || gap < bestGap)) {
        best = prevEnd;
        bestGap = gap;
      }
      prevEnd = std::max(prevEnd, p.end);
    }
    if (best < 0) best = prevEnd;
    offsets[i] = best;
    arena = std::max(arena, best + b.size);
    Placed entry{best, best + b.size, b.first, b.last};
    auto at = std::upper_bound(placed.begin(), placed.end(), entry,
                               [](const Placed& x, const Placed& y) { return x.offset < y.offset; });
    placed.insert(at, entry);
  }
  return arena;
}

std::int64_t assignOffsetsBestFit(const std::vector<Interval>& intervals, std::vector<std::int64_t>& offsets) {
  offsets.assign(intervals.size(), 0);
  FreeList free;
  int lastStep = -1;
  for (size_t i = 0; i < intervals.size(); ++i) {
    const Interval& b = intervals[i];
    if (b.first == -1) {
      offsets[i] = free.end();
      free.setEnd(free.end() + b.size);
    }
    lastStep = std::max(lastStep, b.last);
  }
  // Buffers by first step (largest first, then index), and by last step for freeing.
  std::vector<size_t> byFirst, byLast;
  for (size_t i = 0; i < intervals.size(); ++i)
    if (intervals[i].first >= 0 && intervals[i].size > 0) {
      byFirst.push_back(i);
      byLast.push_back(i);
    }
  std::sort(byFirst.begin(), byFirst.end(), [&](size_t a, size_t b) {
    if (intervals[a].first != intervals[b].first) return intervals[a].first < intervals[b].first;
    if (intervals[a].size != intervals[b].size) return intervals[a].size > intervals[b].size;
    return a < b;
  });
  std::sort(byLast.begin(), byLast.end(), [&](size_t a, size_t b) {
    if (intervals[a].last != intervals[b].last) return intervals[a].last < intervals[b].last;
    return a < b;
  });
  size_t nextAlloc = 0, nextFree = 0;
  while (nextAlloc < byFirst.size()) {
    int step = intervals[byFirst[nextAlloc]].first;
    // Free everything that died before this step, then place what starts here.
    while (nextFree < byLast.size() && intervals[byLast[nextFree]].last < step) {
      size_t i = byLast[nextFree++];
      free.release(offsets[i], intervals[i].size);
    }
    while (nextAlloc < byFirst.size() && intervals[byFirst[nextAlloc]].first == step) {
      size_t i = byFirst[nextAlloc++];
      offsets[i] = free.allocate(intervals[i].size);
    }
  }
  return free.end();
}

namespace {
// Placement reserves every buffer rounded up to kBufferAlignment, so every offset is a multiple
// of it; sizes, liveness and the peak stay exact.
std::int64_t alignedSize(std::int64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}
}  // namespace

MemoryPlan planMemory(const ir::Graph& graph) {
  MemoryPlan plan;
  plan.model = ir::getString(graph.attrs(), "model").value_or(graph.name());
  StorageModel storage = analyzeStorage(graph);
  std::vector<const ir::Node*> order;
  for (const auto& n : graph.nodes()) order.push_back(n.get());
  Liveness l = analyzeLiveness(graph, storage, order);
  ir::ValueNames names(graph);

  plan.timeline = l.liveBytes;
  plan.peakBytes = l.peakBytes;
  plan.peakStep = l.peakStep;
  plan.persistentBytes = l.persistentBytes;
  plan.lossChunks = lossChunksOf(graph);
  for (const ir::Node* node : order) {
    plan.steps.push_back({std::string(node->opName()), std::string(ir::phaseName(node->phase())), node->specName()});
    std::int64_t flops = node->flops();
    switch (node->phase()) {
      case ir::Phase::fwd: plan.forwardFlops += flops; break;
      case ir::Phase::bwd: plan.backwardFlops += flops; break;
      case ir::Phase::opt: plan.optimizerFlops += flops; break;
      case ir::Phase::recompute: plan.recomputeFlops += flops; break;
      case ir::Phase::comm: break;
    }
  }

  std::vector<Interval> intervals;
  for (const Buffer& b : l.buffers) {
    PlannedBuffer pb;
    const ir::Value& v = *b.value;
    pb.name = names(&v);
    pb.kind = b.kind;
    pb.type = ir::toString(v.type());
    pb.size = b.bytes;
    pb.firstStep = b.firstStep;
    pb.lastStep = b.lastStep;
    const bool persistent = b.residency == ir::Residency::Persistent;
    pb.residency = b.residency;
    if (v.kind() == ir::ValueKind::Param) pb.specName = layerOfParam(v);
    else if (v.kind() == ir::ValueKind::Input) pb.specName = v.name();
    else {
      pb.specName = v.producer()->specName();
      pb.producer = std::string(v.producer()->opName());
    }
    plan.buffers.push_back(std::move(pb));
    intervals.push_back({alignedSize(b.bytes), persistent ? -1 : b.firstStep, b.lastStep});
  }
  for (size_t i = 0; i < order.size(); ++i) {
    std::int64_t ws = l.workspaceBytes[i];
    if (ws <= 0) continue;
    const ir::Node& node = *order[i];
    PlannedBuffer pb;
    pb.name = node.numResults() > 0 ? "workspace(" + names(node.result(0)) + ")"
                                    : "workspace(step " + std::to_string(i) + ")";
    pb.specName = node.specName();
    pb.kind = BufferKind::Workspace;
    pb.size = ws;
    pb.firstStep = pb.lastStep = static_cast<int>(i);
    pb.producer = std::string(node.opName());
    plan.buffers.push_back(std::move(pb));
    intervals.push_back({alignedSize(ws), static_cast<int>(i), static_cast<int>(i)});
  }

  std::vector<std::int64_t> offsets;
  plan.arenaBytes = assignOffsets(intervals, offsets);
  for (size_t i = 0; i < plan.buffers.size(); ++i) plan.buffers[i].offset = offsets[i];
  plan.ranks.push_back({0, plan.peakBytes, plan.arenaBytes});
  return plan;
}

Status verifyNoOverlap(const MemoryPlan& plan) {
  const auto& bs = plan.buffers;
  std::vector<ir::ArenaInterval> intervals;
  intervals.reserve(bs.size());
  for (const PlannedBuffer& b : bs) {
    intervals.push_back({b.offset, b.size, b.firstStep, b.lastStep});
    if (!ir::insideArena(intervals.back(), plan.arenaBytes))
      return Error{"buffer " + b.name + " [" + std::to_string(b.offset) + ", " + std::to_string(b.offset + b.size) +
                   ") lies outside the arena of " + std::to_string(plan.arenaBytes) + " bytes"};
  }
  auto describe = [&](size_t i) {
    return bs[i].name + " (bytes [" + std::to_string(bs[i].offset) + ", " + std::to_string(bs[i].offset + bs[i].size) +
           "), steps " + std::to_string(bs[i].firstStep) + ".." + std::to_string(bs[i].lastStep) + ")";
  };
  if (auto pair = ir::findArenaOverlap(intervals))
    return Error{"buffers overlap: " + describe(pair->first) + " and " + describe(pair->second)};
  return {};
}

}  // namespace gradc::passes
