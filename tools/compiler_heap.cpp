#include "tools/compiler_heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace gradc::tools {

void tuneHeapForCompiling() {
  // Every block from the main heap (mmap'd blocks are unmapped when freed), and no trimming of
  // its top: freed pages are reused instead of faulted in again.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  // No fast bins: a compile frees millions of small blocks (names, shapes, use lists, strides)
  // between large allocations, and each large allocation would first walk every fast-bin block
  // to merge it (malloc_consolidate, 3-5% of a 150,000-layer summary). Without them a freed
  // block is merged when it is freed; the per-thread cache still serves small blocks. At
  // 150,000 layers: median 10.6 s with fast bins, 9.7 s without (4 runs each, alternated).
  mallopt(M_MXFAST, 0);
  // Huge pages for the heap: grow it once by a large block that nothing touches (address space
  // only: a page costs memory when first written), ask for transparent huge pages there, and
  // give the block back. The allocator keeps it as the heap's top and carves later blocks out
  // of it, so a first touch faults in 2 MiB instead of 4 KiB. On this project's virtual
  // machines a first touch costs about 3.5 s per GiB with 4 KiB pages and 1.2-1.9 s with huge
  // pages (docs/reliability.md). Where the kernel has huge pages off, the advice does nothing.
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0) return;
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const std::size_t reserve = std::min<std::size_t>(
      static_cast<std::size_t>(pages) * static_cast<std::size_t>(pageSize) / 2, std::size_t{64} << 30);
  void* block = std::malloc(reserve);
  if (!block) return;  // no address space to spare (a strict overcommit policy): 4 KiB pages
  const auto at = reinterpret_cast<std::uintptr_t>(block);
  const std::uintptr_t begin = (at + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t end = (at + reserve) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  std::free(block);
}

}  // namespace gradc::tools
