// The tracking CPU allocator: live bytes, high-water mark, kernel temporaries.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <thread>
#include <vector>

#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's and abort
// instead of recording the failure.
#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;

namespace {
constexpr std::int64_t kMiB = 1 << 20;
}

TEST_CASE("install is idempotent and takes over the CPU allocator") {
  CHECK(MemoryTracker::install());
  CHECK(MemoryTracker::install());
  CHECK(MemoryTracker::installed());
}

TEST_CASE("allocating and freeing a tensor moves current and peak") {
  REQUIRE(MemoryTracker::install());
  MemoryTracker::resetPeak();
  const std::int64_t before = MemoryTracker::currentBytes();
  CHECK(MemoryTracker::peakBytes() == before);
  {
    at::Tensor t = at::empty({kMiB / 4}, at::kFloat);  // 1 MiB
    CHECK(MemoryTracker::currentBytes() - before >= kMiB);
    CHECK(MemoryTracker::peakBytes() - before >= kMiB);
  }
  CHECK(MemoryTracker::currentBytes() == before);
  CHECK(MemoryTracker::peakBytes() - before >= kMiB);  // the peak remembers
  MemoryTracker::resetPeak();
  CHECK(MemoryTracker::peakBytes() == MemoryTracker::currentBytes());
}

TEST_CASE("a kernel's internal temporaries show in the peak") {
  REQUIRE(MemoryTracker::install());
  // cross_entropy materialises log-probabilities as large as the logits (its declared
  // workspace) and returns a scalar: the peak sees the temporary although nothing stays.
  at::Tensor logits = at::randn({256, 4096});  // 4 MiB
  at::Tensor target = at::randint(0, 4096, {256}, at::kLong);
  MemoryTracker::resetPeak();
  const std::int64_t before = MemoryTracker::currentBytes();
  Expected<std::vector<at::Tensor>> loss = callOp("cross_entropy", std::vector<at::Tensor>{logits, target});
  REQUIRE(loss.ok());
  const std::int64_t logitBytes = logits.numel() * 4;
  MESSAGE("cross_entropy: peak above live " << MemoryTracker::peakBytes() - before << " bytes for " << logitBytes
                                            << " bytes of logits");
  CHECK(MemoryTracker::peakBytes() - before >= logitBytes);
  CHECK(MemoryTracker::currentBytes() - before < 4096);  // only the scalar loss (and tiny buffers) remain
}

TEST_CASE("counters are consistent under concurrent allocation") {
  REQUIRE(MemoryTracker::install());
  const std::int64_t before = MemoryTracker::currentBytes();
  const std::int64_t allocs = MemoryTracker::allocationCount();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 500; ++i) {
        at::Tensor a = at::empty({1000 + i}, at::kFloat);
        at::Tensor b = at::empty({77}, at::kDouble);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(MemoryTracker::currentBytes() == before);
  CHECK(MemoryTracker::allocationCount() - allocs >= 4 * 500 * 2);
}

TEST_CASE("raw_allocate and raw_deallocate work through the tracker") {
  REQUIRE(MemoryTracker::install());
  const std::int64_t before = MemoryTracker::currentBytes();
  c10::Allocator* alloc = c10::GetCPUAllocator();
  void* p = alloc->raw_allocate(12345);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  CHECK(MemoryTracker::currentBytes() - before == 12345);
  alloc->raw_deallocate(p);
  CHECK(MemoryTracker::currentBytes() == before);
}

TEST_CASE("null and foreign raw pointers are released safely") {
  REQUIRE(MemoryTracker::install());
  const std::int64_t before = MemoryTracker::currentBytes();
  c10::Allocator* alloc = c10::GetCPUAllocator();
  // oneDNN's engine allocator releases null buffers through raw_deallocate.
  alloc->raw_deallocate(nullptr);
  // Raw memory from the allocator the tracker delegates to (as if allocated before install)
  // goes back to it, uncounted.
  void* foreign = c10::GetDefaultCPUAllocator()->raw_allocate(4096);
  alloc->raw_deallocate(foreign);
  CHECK(MemoryTracker::currentBytes() == before);
}
