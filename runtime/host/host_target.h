// The host backend (the CPU, --device cpu): its compile-time description (ir/kernel_target.h),
// built without LibTorch into gradc_kernel_targets, and its row of the runtime's backend table.
#pragma once

#include "ir/kernel_target.h"

namespace gradc::runtime {
struct Backend;
}  // namespace gradc::runtime

namespace gradc::runtime::host {

// Workspace rules of the host's own kernels (runtime/kernels: host*Kernels()), Gloo between
// ranks, generated kernels as a CPU shared object, no library reserve.
const ir::KernelTarget& kernelTarget();
// Its row of the backend table (runtime/backends/backends.h; defined in host_backend.cpp).
Backend backend();

}  // namespace gradc::runtime::host
