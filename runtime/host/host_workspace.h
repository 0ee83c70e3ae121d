// The host's workspace rules (its row of ir::KernelTarget, runtime/host/host_target.cpp) for the
// ops whose host kernels allocate differently from the portable ATen kernels: the products in
// bf16 and f16 (oneDNN's scratchpad or the widened panels), the fused loss's products, the tiled
// attention, rms_norm's backward in bf16 and f16. Convolutions: runtime/host/host_conv_problem.h.
// The kernels read the same functions for the temporaries they hand out.
#pragma once

#include <cstdint>
#include <span>

#include "ir/op_table.h"
#include "onednn/gemm.h"

namespace gradc::runtime::host {

// In bf16 and f16, the temporaries of the route this process runs a product on (oneDNN's
// scratchpad or the widened products' panels); 0 in f32 and f64.
std::int64_t productWorkspace(const onednn::ProductShape& shape, ir::DType dtype, int threads);
std::int64_t workspaceMatmul(const ir::OpContext& c, std::span<const ir::TensorType> results);
std::int64_t workspaceLinear(const ir::OpContext& c, std::span<const ir::TensorType> results);
std::int64_t workspaceLinearWeightGrad(const ir::OpContext& c, std::span<const ir::TensorType> results);

// The temporaries each of linear_cross_entropy's matrix products gets in bf16 and f16
// (productWorkspace): the most any of them needs (logits, grad_x, grad_w and grad_bias
// accumulated) for a full chunk and for the last one; 0 in other dtypes. Part of the declared
// workspace; the kernel hands every product this many bytes.
std::int64_t linearCrossEntropyProductScratch(std::int64_t rows, std::int64_t chunks, std::int64_t features,
                                              std::int64_t classes, bool bias, ir::DType dtype, int kernelThreads);
// The op table's rule plus those temporaries.
std::int64_t workspaceLinearCrossEntropy(const ir::OpContext& c, std::span<const ir::TensorType> results);

}  // namespace gradc::runtime::host
