// The CUDA row of a build against a CPU-only LibTorch: asking for it says what to build instead
// of "unknown device".
#include "runtime/cuda/cuda_target.h"
#include "runtime/backends/backends.h"

namespace gradc::runtime::cuda {

Backend backend() {
  Backend b;
  b.target = &kernelTarget();
  b.name = b.target->name();
  b.missing = "this gradc was built against a CPU-only LibTorch, so it cannot run on a GPU; build it against a CUDA "
              "LibTorch (docs/gpu.md)";
  return b;
}

}  // namespace gradc::runtime::cuda
