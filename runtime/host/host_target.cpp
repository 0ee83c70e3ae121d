// The host's description: the ops whose host kernels allocate differently from the portable ATen
// kernels, and what its ranks' communicator (Gloo) can sum.
#include "runtime/host/host_target.h"

#include <algorithm>

#include "ir/attention_rules.h"
#include "ir/op_rules.h"
#include "runtime/host/host_conv_problem.h"
#include "runtime/host/host_workspace.h"

namespace gradc::runtime::host {
namespace {

using ir::OpContext;
using Types = std::span<const ir::TensorType>;

// The tiled kernels (runtime/kernels/kernels_attention.cpp): one tile slot per thread.
std::int64_t workspaceAttention(const OpContext& c, Types) {
  return ir::rules::saturatingMul(std::max(c.kernelThreads, 1) * ir::attentionTilingOf(c, 0).forwardSlot(),
                                  ir::dtypeSize(c.inputs[0].dtype));
}
std::int64_t workspaceAttentionBackward(const OpContext& c, Types) {
  return ir::rules::saturatingMul(std::max(c.kernelThreads, 1) * ir::attentionTilingOf(c, 1).backwardSlot(),
                                  ir::dtypeSize(c.inputs[1].dtype));
}

// bf16 and f16 rows are summed in a float loop of the kernel's own, which wraps no Scalar
// (runtime/kernels/kernels_transformer.cpp); other dtypes as the portable kernel.
std::int64_t workspaceRmsNormBackward(const OpContext& c, Types r) {
  const ir::TensorType& x = c.inputs[1];
  const std::int64_t portable = ir::findOp("rms_norm_backward")->workspaceBytes(c, r);
  const bool ownMean = x.dtype == ir::DType::bf16 || x.dtype == ir::DType::f16;
  return ownMean ? portable - ir::scalarOperandBytes(x.dtype) : portable;
}

// c10d's Gloo has no bf16 sum.
bool glooSums(ir::DType dtype) { return dtype != ir::DType::bf16; }

}  // namespace

const ir::KernelTarget& kernelTarget() {
  static const ir::KernelTarget target({
      .name = "cpu",
      .communicator = "Gloo",
      .ranks = "CPU ranks",
      .sums = glooSums,
      .kernelFormat = ir::KernelFormat::sharedObject,
      .libraryReserveBytes = 0,
      .workspace = {{"matmul", workspaceMatmul},
                    {"linear", workspaceLinear},
                    {"linear_weight_grad", workspaceLinearWeightGrad},
                    {"linear_cross_entropy", workspaceLinearCrossEntropy},
                    {"conv2d", workspaceConv2d},
                    {"conv2d_input_grad", workspaceConv2dInputGrad},
                    {"conv2d_weight_grad", workspaceConv2dWeightGrad},
                    {"attention", workspaceAttention},
                    {"attention_backward", workspaceAttentionBackward},
                    {"rms_norm_backward", workspaceRmsNormBackward}},
  });
  return target;
}

}  // namespace gradc::runtime::host
