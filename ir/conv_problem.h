// A conv2d node's im2col kernel as the portable rule sees it, from the types of its weights and
// output and its window attributes: one definition for the op table's workspace rule
// (ir/ops_conv.cpp) and the host's kernels (runtime/kernels/kernels_conv.cpp), so both ask the
// same question and get the same answer.
//
// The im2col + GEMM kernel (every dtype) needs one sample's column matrix (or a chunk's, for
// small outputs). The host runs f32 problems that oneDNN has a blocked kernel for there instead,
// and gives its bf16 and f16 products temporaries of their own: its rules are
// runtime/host/host_conv_problem.h.
#pragma once

#include <cstdint>

#include "ir/attribute.h"
#include "ir/tensor_type.h"

namespace gradc::ir {

// The im2col kernel's workspace for a pass with weights w and (forward) output y.
std::int64_t im2colWorkspaceBytes(const AttrMap& attrs, const TensorType& w, const TensorType& y);

}  // namespace gradc::ir
