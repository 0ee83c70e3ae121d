// Registers every backend's compile-time description (runtime/backends/backends.def) with the
// compiler (ir/kernel_target.h). Built without LibTorch (gradc_kernel_targets): the compiler, the
// runtime and the tests call it once, first thing; calling it again does nothing.
#pragma once

namespace gradc::runtime {

void registerKernelTargets();

}  // namespace gradc::runtime
