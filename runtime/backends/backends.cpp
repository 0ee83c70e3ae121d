// The table of backends (runtime/backends/backends.h): one row per line of backends.def, each
// made by its folder. A backend this build lacks keeps its row, with the reason, so that asking
// for it says what to build instead of "unknown device".
#include "runtime/backends/backends.h"

#include "runtime/backends/kernel_targets.h"

#define GRADC_BACKEND(ns)    \
  namespace gradc::runtime::ns { \
  Backend backend();          \
  }
#include "runtime/backends/backends.def"
#undef GRADC_BACKEND

namespace gradc::runtime {

std::span<const Backend> backends() {
  registerKernelTargets();  // the rows point at their descriptions, which plans name
  static const Backend table[] = {
#define GRADC_BACKEND(ns) ns::backend(),
#include "runtime/backends/backends.def"
#undef GRADC_BACKEND
  };
  return table;
}

const Backend* findBackend(std::string_view name) {
  for (const Backend& b : backends())
    if (b.name == name) return &b;
  return nullptr;
}

const Backend& hostBackend() { return backends().front(); }

std::string backendNames() {
  std::string out;
  for (const Backend& b : backends()) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

}  // namespace gradc::runtime
