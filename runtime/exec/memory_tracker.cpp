#include "runtime/exec/memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gradc::runtime {
namespace {

std::atomic<std::int64_t> gCurrent{0};
std::atomic<std::int64_t> gPeak{0};
std::atomic<std::int64_t> gCount{0};
std::atomic<std::int64_t> gArena{0};
std::atomic<std::int64_t> gOutside{0};
std::atomic<std::int64_t> gOutsidePeak{0};

void raise(std::atomic<std::int64_t>& peak, std::int64_t now) {
  std::int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void addBytes(std::int64_t n) { raise(gPeak, gCurrent.fetch_add(n, std::memory_order_relaxed) + n); }

void addOutside(std::int64_t n) {
  addBytes(n);
  raise(gOutsidePeak, gOutside.fetch_add(n, std::memory_order_relaxed) + n);
}

// Live tracked blocks, keyed by data pointer, in shards so that concurrent allocations rarely
// contend. Each entry keeps the previous allocator's DataPtr, which frees the block.
struct Block {
  std::int64_t bytes;
  c10::DataPtr inner;
};
struct Shard {
  std::mutex mutex;
  std::unordered_map<void*, Block> blocks;
};
constexpr int kShardBits = 6;

Shard& shardOf(void* data) {
  // Never destroyed: tensors (and oneDNN caches) are freed during static destruction too.
  static Shard* const shards = new Shard[1 << kShardBits];
  auto h = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(data) >> 6) * 0x9e3779b97f4a7c15ull;
  return shards[h >> (64 - kShardBits)];
}

c10::Allocator* gPrevious = nullptr;  // set once, before the tracker is registered

// The workspace region: a stack of blocks carved from [base, base + size).
struct RegionBlock {
  std::int64_t begin, end;
  bool freed;
};
struct Region {
  std::mutex mutex;
  char* base = nullptr;
  std::int64_t size = 0;
  bool active = false;
  std::vector<RegionBlock> blocks;  // in allocation order
  std::int64_t live = 0;
};
Region& region() {
  static Region* const r = new Region();  // never destroyed, like the shards
  return *r;
}
std::atomic<bool> gRegionInUse{false};  // a region is set or still has live blocks
std::atomic<std::int64_t> gRegionServed{0};
std::atomic<std::int64_t> gHeapServed{0};

constexpr std::int64_t kRegionAlignment = 64;

// A block of `n` bytes from the region, or nullptr.
void* allocateInRegion(std::int64_t n) {
  Region& r = region();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.active) return nullptr;
  std::int64_t top = r.blocks.empty() ? 0 : r.blocks.back().end;
  std::int64_t begin = (top + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
  if (begin + n > r.size) return nullptr;
  r.blocks.push_back({begin, begin + n, false});
  ++r.live;
  return r.base + begin;
}

// Frees a region block; false when `data` is not one.
bool freeInRegion(void* data) {
  Region& r = region();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto* p = static_cast<char*>(data);
  for (size_t i = r.blocks.size(); i-- > 0;) {
    RegionBlock& b = r.blocks[i];
    if (b.freed || r.base + b.begin != p) continue;
    b.freed = true;
    --r.live;
    gCurrent.fetch_sub(b.end - b.begin, std::memory_order_relaxed);
    gOutside.fetch_sub(b.end - b.begin, std::memory_order_relaxed);
    while (!r.blocks.empty() && r.blocks.back().freed) r.blocks.pop_back();
    if (!r.active && r.blocks.empty()) gRegionInUse.store(false);
    return true;
  }
  return false;
}

void deleteInRegion(void* data) {
  [[maybe_unused]] bool found = freeInRegion(data);
}

void deleteTracked(void* data) {
  if (data == nullptr) return;
  if (gRegionInUse.load(std::memory_order_relaxed) && freeInRegion(data)) return;  // raw_deallocate of a region block
  Shard& shard = shardOf(data);
  std::optional<Block> block;
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.blocks.find(data);
    if (it != shard.blocks.end()) {
      block.emplace(std::move(it->second));
      shard.blocks.erase(it);
    }
  }
  if (block) {
    gCurrent.fetch_sub(block->bytes, std::memory_order_relaxed);
    gOutside.fetch_sub(block->bytes, std::memory_order_relaxed);
    return;  // `block` is destroyed here, returning the memory to the previous allocator
  }
  // Not ours: raw memory the previous allocator handed out before install() and that is
  // released through the now-current allocator (oneDNN's engine allocator does this).
  gPrevious->raw_deallocate(data);
}

// Fault injection, for the tests of how gradc reports a failed allocation:
// GRADC_FAIL_ALLOCATION_AFTER=N makes every tracked allocation after the first N fail, as an
// exhausted allocator does (a c10::Error). Read once, when the tracker is installed; -1: off.
std::int64_t gFailAfter = -1;

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data (both 1.13 and 2.x build).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define GRADC_ALLOCATE_CONST
#define GRADC_ALLOCATOR_COPY_DATA 1
#else
#define GRADC_ALLOCATE_CONST const
#define GRADC_ALLOCATOR_COPY_DATA 0
#endif

class TrackingAllocator final : public c10::Allocator {
 public:
#if GRADC_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#endif
  c10::DataPtr allocate(std::size_t n) GRADC_ALLOCATE_CONST override {
    if (gFailAfter >= 0 && n > 0 && gCount.load(std::memory_order_relaxed) >= gFailAfter)
      TORCH_CHECK(false, "DefaultCPUAllocator: not enough memory: you tried to allocate ", n,
                  " bytes (GRADC_FAIL_ALLOCATION_AFTER=", gFailAfter, ")");
    if (n > 0 && gRegionInUse.load(std::memory_order_relaxed))
      if (void* data = allocateInRegion(static_cast<std::int64_t>(n))) {
        gCount.fetch_add(1, std::memory_order_relaxed);
        gRegionServed.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
        addOutside(static_cast<std::int64_t>(n));
        return {data, data, &deleteInRegion, c10::Device(c10::DeviceType::CPU)};
      }
    c10::DataPtr inner = gPrevious->allocate(n);
    void* data = inner.get();
    if (n == 0 || data == nullptr) return inner;
    c10::Device device = inner.device();
    {
      Shard& shard = shardOf(data);
      std::lock_guard<std::mutex> lock(shard.mutex);
      shard.blocks.emplace(data, Block{static_cast<std::int64_t>(n), std::move(inner)});
    }
    gCount.fetch_add(1, std::memory_order_relaxed);
    gHeapServed.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
    addOutside(static_cast<std::int64_t>(n));
    return {data, data, &deleteTracked, device};
  }

  // Makes raw_allocate/raw_deallocate work: the context is the data pointer.
  c10::DeleterFnPtr raw_deleter() const override { return &deleteTracked; }
};

// Never destroyed: tensors may outlive static destruction order.
std::atomic<TrackingAllocator*> gTracker{nullptr};
std::once_flag gInstallOnce;

// Above the default CPU allocator's registration priority (0), so the tracker wins.
constexpr std::uint8_t kPriority = 100;

}  // namespace

bool MemoryTracker::install() {
  std::call_once(gInstallOnce, [] {
    if (const char* fail = std::getenv("GRADC_FAIL_ALLOCATION_AFTER")) {
      char* end = nullptr;
      const long long n = std::strtoll(fail, &end, 10);
      if (end != fail && *end == '\0' && n >= 0) gFailAfter = n;
    }
    gPrevious = c10::GetAllocator(c10::DeviceType::CPU);
    auto* tracker = new TrackingAllocator();
    gTracker.store(tracker);
    c10::SetAllocator(c10::DeviceType::CPU, tracker, kPriority);
  });
  return installed();
}

bool MemoryTracker::installed() {
  TrackingAllocator* tracker = gTracker.load();
  return tracker != nullptr && c10::GetAllocator(c10::DeviceType::CPU) == tracker;
}

std::int64_t MemoryTracker::currentBytes() { return gCurrent.load(std::memory_order_relaxed); }

std::int64_t MemoryTracker::peakBytes() { return gPeak.load(std::memory_order_relaxed); }

void MemoryTracker::resetPeak() { gPeak.store(gCurrent.load(std::memory_order_relaxed), std::memory_order_relaxed); }

std::int64_t MemoryTracker::allocationCount() { return gCount.load(std::memory_order_relaxed); }

void MemoryTracker::setWorkspaceRegion(void* base, std::int64_t bytes) {
  Region& r = region();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.blocks.empty()) return;  // a block outlived an earlier region: never hand out that memory again
  r.base = static_cast<char*>(base);
  r.size = bytes;
  r.active = true;
  gRegionInUse.store(true);
}

std::int64_t MemoryTracker::clearWorkspaceRegion() {
  Region& r = region();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.active = false;
  if (r.blocks.empty()) gRegionInUse.store(false);
  return r.live;
}

std::int64_t MemoryTracker::regionBytesServed() { return gRegionServed.load(std::memory_order_relaxed); }

std::int64_t MemoryTracker::heapBytesServed() { return gHeapServed.load(std::memory_order_relaxed); }

void MemoryTracker::addArenaBytes(std::int64_t delta) {
  gArena.fetch_add(delta, std::memory_order_relaxed);
  if (delta >= 0) addBytes(delta);
  else gCurrent.fetch_add(delta, std::memory_order_relaxed);
}

std::int64_t MemoryTracker::arenaBytes() { return gArena.load(std::memory_order_relaxed); }

std::int64_t MemoryTracker::outsideBytes() { return gOutside.load(std::memory_order_relaxed); }

std::int64_t MemoryTracker::outsidePeakBytes() { return gOutsidePeak.load(std::memory_order_relaxed); }

void MemoryTracker::resetOutsidePeak() {
  gOutsidePeak.store(gOutside.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace gradc::runtime
