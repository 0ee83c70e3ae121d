// conv2d, conv2d_input_grad and conv2d_weight_grad on oneDNN's blocked kernels (onednn/conv.h),
// for f32 on the CPU. Each kernel of runtime/kernels/kernels_conv.cpp calls this first; false when it
// does not apply (another dtype, no oneDNN kernel, or a plan that declared the im2col
// workspace, e.g. one made where oneDNN was absent), and the im2col kernel runs instead. The
// workspace is one allocation of exactly the node's declared bytes (the op table asked oneDNN
// for them, ir/ops_conv.cpp), carved from the step's planned workspace: measured == planned.
// The chunk of samples per oneDNN call is the op table's choice too (runtime/host/host_conv_problem.h).
#pragma once

#include <ATen/core/Tensor.h>

#include "onednn/conv.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime {

// `result`: the node's result buffer (y, gx or gw), written in place.
bool oneDnnConv2d(const KernelArgs& a, onednn::ConvPass pass, const at::Tensor& result);

}  // namespace gradc::runtime
