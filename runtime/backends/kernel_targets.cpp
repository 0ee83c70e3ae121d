#include "runtime/backends/kernel_targets.h"

#include <mutex>

#include "ir/kernel_target.h"

#define GRADC_BACKEND(ns)                                \
  namespace gradc::runtime::ns {                         \
  const ir::KernelTarget& kernelTarget();                \
  }
#include "runtime/backends/backends.def"
#undef GRADC_BACKEND

namespace gradc::runtime {

void registerKernelTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
#define GRADC_BACKEND(ns) ir::registerKernelTarget(ns::kernelTarget());
#include "runtime/backends/backends.def"
#undef GRADC_BACKEND
  });
}

}  // namespace gradc::runtime
