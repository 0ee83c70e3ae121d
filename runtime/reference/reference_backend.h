// The reference backend (--device reference): the host's memory and ranks, but the portable ATen
// kernels (runtime/kernels/kernels.h) wherever an op has one, instead of the host's own
// (raw-pointer loops, oneDNN, the row-blocked and tile products, generated code); the host's
// run only the ops with no portable kernel (dropout's counter-based masks). What the CPU runs the same model with,
// minus every optimisation gradc adds: a baseline for speed, and a second opinion on numerics
// ("is this loss gradc's kernels or the model?"). Plans for it use the op table's workspace
// rules, which are the portable kernels'; artifacts run their reference step (fused regions as
// ATen kernels).
#pragma once

#include "ir/kernel_target.h"

namespace gradc::runtime {
struct Backend;
}  // namespace gradc::runtime

namespace gradc::runtime::reference {

// Its compile-time description (reference_target.cpp, no LibTorch): no workspace rule of its
// own, Gloo between ranks, no generated kernels, no library reserve.
const ir::KernelTarget& kernelTarget();
// Its row of the backend table (reference_backend.cpp).
Backend backend();

}  // namespace gradc::runtime::reference
