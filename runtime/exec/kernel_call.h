// What the executor and callOp share to run one kernel (runtime/exec/kernel_call.cpp); the
// public checks (checkResults, describeTensor, callOp) are declared in runtime/exec/executor.h.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

#include "ir/status.h"
#include "ir/tensor_type.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime {

// The IR type of a tensor; nullopt for an element type the IR has no name for.
std::optional<ir::TensorType> typeOf(const at::Tensor& t);
// Whether `t` is defined and exactly of `type` (element type and shape).
bool hasType(const at::Tensor& t, const ir::TensorType& type);
// Runs a kernel, turning ATen exceptions into an Error that names the op.
Expected<std::vector<at::Tensor>> callKernel(KernelFn kernel, const KernelArgs& args);

}  // namespace gradc::runtime
