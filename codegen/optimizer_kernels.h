// The one-pass AdamW update as a generated kernel (adamw_step {fused = true}, set by
// passes/fuse.h): each element's parameter, gradient and moments are read and written once.
//
//   CPU:   void gradc_adamw_<f32|f64>(void* const* buffers, int64_t begin, int64_t end, const double* s)
//          buffers = param, grad, m, v (runtime/kernels/generated_kernels.h);
//   NVPTX: kernel gradc_adamw_<f32|f64>(ptr param, ptr grad, ptr m, ptr v, i64 n, double s0..s8),
//          a grid-stride loop over the n elements (runtime/cuda/ptx_kernels.h);
//   s = grad_scale, 1 - lr wd, beta1, 1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2^step), eps,
//   -lr / (1 - beta1^step).
//
// Per element, in the element type, in the op-by-op path's order (runtime/kernels/kernels_optimizer.cpp):
//   g = grad * grad_scale;  p = param * (1 - lr wd)
//   m = m beta1 + g (1 - beta1);  v = v beta2 + g g (1 - beta2)
//   param = p + step_size * (m / (sqrt(v) / sqrt(1 - beta2^step) + eps))
// A scale or decay of exactly 1 multiplies exactly, so one kernel serves every configuration.
// The runtime's C++ loop of the same arithmetic (used without generated kernels) gives the same
// bits (a test checks it): neither contracts multiply-adds.
#pragma once

#include <string>

#include <llvm/IR/Module.h>

#include "codegen/kernel_builder.h"
#include "ir/dtype.h"
#include "ir/status.h"

namespace gradc::codegen {

Status addAdamwKernel(llvm::Module& module, ir::DType dtype, const std::string& name, Target target = Target::Cpu);

}  // namespace gradc::codegen
