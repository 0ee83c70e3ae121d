#include "tools/compiler_heap.h"

#include <malloc.h>

namespace gradc::tools {

void tuneHeapForCompiling() {
  // Every block from the main heap (mmap'd blocks are unmapped when freed), and no trimming of
  // its top: freed pages are reused instead of faulted in again.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
}

}  // namespace gradc::tools
