// Measured memory: a tracking CPU allocator for ATen.
//
// install() puts a thin allocator in front of the CPU allocator that was registered before
// (c10::GetAllocator(CPU)); every ATen CPU allocation made afterwards -- parameters,
// gradients, optimizer state, activations, kernel temporaries -- goes through it and is
// counted: live bytes now and the high-water mark. This is the "measured" side of the
// planned-vs-measured peak the runtime reports.
//
// How it delegates: each request goes to the previous allocator unchanged (same size, same
// alignment); the tracker keeps that allocator's DataPtr in a sharded table keyed by the data
// pointer and hands out a DataPtr whose context is the data pointer, so raw_allocate and
// raw_deallocate keep working. Raw memory the previous allocator handed out before install()
// and that is later released through the current allocator (oneDNN's engine allocator looks
// the allocator up on every call) is not in the table and goes back to the previous allocator.
//
// Arena execution (runtime/exec/executor.h with a memory plan): the arena is one block from the
// device, not from ATen's allocator; the executor reports the planned bytes it takes into use
// and gives back (addArenaBytes), and they count in currentBytes()/peakBytes() beside the
// allocator's, so the measured peak is arena bytes in use at the high-water mark plus what
// kernels allocate outside the arena. The outside-arena part alone is kept too
// (outsideBytes, outsidePeakBytes), for the per-op workspace check.
//
// Not counted: blocks allocated before install() (freeing them does not change the counters
// either), and memory that bypasses ATen's allocator (std containers, MKL internals). Thread
// safe: counters are atomics, the table is sharded behind mutexes.
#pragma once

#include <cstdint>

namespace gradc::runtime {

class MemoryTracker {
 public:
  // Installs the tracking allocator for DeviceType::CPU. Idempotent and thread safe; returns
  // false if another allocator registered with a higher priority keeps it from taking effect.
  static bool install();
  static bool installed();

  // Bytes of tracked allocations alive now.
  static std::int64_t currentBytes();
  // The most bytes alive at once since install() or the last resetPeak().
  static std::int64_t peakBytes();
  // Sets the peak to the current live bytes, to measure the peak of what follows.
  static void resetPeak();
  // Number of tracked allocations made since install() (a cheap probe for tests and metrics).
  static std::int64_t allocationCount();

  // Arena bytes taken into use (delta > 0) or given back (delta < 0) by an executor.
  static void addArenaBytes(std::int64_t delta);
  static std::int64_t arenaBytes();
  // Allocator-tracked bytes alive now (everything outside arenas), and their high-water mark
  // since the last resetOutsidePeak().
  static std::int64_t outsideBytes();
  static std::int64_t outsidePeakBytes();
  static void resetOutsidePeak();

  // Workspace planned in the arena. While a region is set, allocations are carved from it
  // (64-byte aligned; freeing the newest block makes its room reusable, as temporaries die in
  // reverse order); a request that does not fit goes to the heap as before. Both count as
  // outside-arena bytes: they are the running kernel's workspace. The executor sets the region
  // to the step's planned workspace range around each kernel.
  static void setWorkspaceRegion(void* base, std::int64_t bytes);
  // Ends the region. Returns how many of its blocks are still alive: a block that outlives its
  // step would be overwritten by the buffers placed there later, so anything but 0 is an error
  // for the caller to report.
  static std::int64_t clearWorkspaceRegion();
  // Bytes served from regions since install() (how much workspace stayed inside arenas), and
  // bytes served by the heap (everything else the allocator handed out).
  static std::int64_t regionBytesServed();
  static std::int64_t heapBytesServed();
};

}  // namespace gradc::runtime
