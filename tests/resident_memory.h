// The resident memory of the test process, for tests that bound what an operation costs in
// memory (an invariant, not a timing): the second field of /proc/self/statm, file pages included.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace gradc::testing {

inline std::int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace gradc::testing
