// bf16 matrix products on oneDNN with their scratchpad from the plan (onednn/gemm.h).
//
// The host's products' kernels (matmul, linear, linear_weight_grad, the fused loss) call these
// first; each returns false when it does not apply (another dtype, no oneDNN kernel for the layout,
// or a plan made where oneDNN needed less scratchpad), and the kernel then runs ATen's product,
// which gives the same result and allocates its own scratchpad. The scratchpad is one
// allocation of exactly the node's declared workspace (ir/ops_gemm_workspace.cpp), made while
// the executor carves the step's temporaries from its planned workspace: the measured peak
// equals the plan's.
//
// Operands arrive in the layouts the planner's storage model assumes ATen's product reads
// (passes/memory/storage.cpp): what it copies is copied here too, nothing else.
#pragma once

#include <ATen/core/Tensor.h>

#include "ir/graph.h"

namespace gradc::runtime {

// out[m, n] (contiguous) = a[m, k] @ b[k, n] (+ bias[n]); a and b 2-D with any strides a BLAS
// reads (row- or column-major with a leading dimension). The scratchpad: the node's declared
// workspace.
bool oneDnnProduct2d(const ir::Node& node, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias,
                     const at::Tensor& out);
// The same with a scratchpad of `scratchBytes`, adding the product to `out` when `accumulate`:
// for kernels that run several products (their workspace declares the scratchpad beside their
// other temporaries).
bool oneDnnProduct2d(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Tensor& out,
                     std::int64_t scratchBytes, bool accumulate = false);

// out = a @ b as the matmul op defines it ([..., m, k] @ [..., k, n], batch dims broadcast),
// folded as at::matmul folds it: one [M, k] @ [k, n] product, or [P, m, k] @ [P, k, n].
bool oneDnnMatmul(const ir::Node& node, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);

}  // namespace gradc::runtime
