// bf16 and f16 matrix products on the host, with their temporaries from the plan.
//
// Two routes (onednn::bf16Route() picks one per process, and the op table's workspace rules ask
// the same question, runtime/host/host_workspace_products.cpp):
//  - bf16 on a CPU with bf16 instructions: oneDNN's matmul, its scratchpad the node's declared
//    workspace (onednn/gemm.h);
//  - bf16 elsewhere, and f16 everywhere: f32 products of the widened operands, rounded once
//    (runtime/kernels/widened_products.h), their panels the node's declared workspace.
// Either way the result is one rounding of an f32 accumulation, and the temporaries are one
// allocation of exactly the declared bytes, made while the executor carves the step's
// temporaries from its planned workspace: the measured peak equals the plan's.
//
// The host's products' kernels (matmul, linear, linear_weight_grad, the fused loss) call these
// first; each returns false when it does not apply (f32 or f64, or a plan made where the route
// needed less than this CPU's), and the kernel then runs ATen's product.
//
// Operands arrive in the layouts the planner's storage model assumes ATen's product reads
// (passes/memory/storage.cpp): what it copies is copied here too, nothing else.
#pragma once

#include <ATen/core/Tensor.h>

#include "ir/graph.h"

namespace gradc::runtime {

// out[m, n] (contiguous) = a[m, k] @ b[k, n] (+ bias[n]); a and b 2-D with any strides a BLAS
// reads (row- or column-major with a leading dimension). The temporaries: the node's declared
// workspace.
bool lowPrecisionProduct2d(const ir::Node& node, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias,
                           const at::Tensor& out);
// The same with `scratchBytes` of temporaries, adding the product to `out` when `accumulate`:
// for kernels that run several products (their workspace declares one product's temporaries
// beside their own, runtime/host/host_workspace.h).
bool lowPrecisionProduct2d(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Tensor& out,
                           std::int64_t scratchBytes, bool accumulate = false);

// out = a @ b as the matmul op defines it ([..., m, k] @ [..., k, n], batch dims broadcast),
// folded as at::matmul folds it: one [M, k] @ [k, n] product, or [P, m, k] @ [P, k, n].
bool lowPrecisionMatmul(const ir::Node& node, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out);

}  // namespace gradc::runtime
