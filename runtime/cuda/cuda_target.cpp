// CUDA's description: the workspace of the nodes ATen's fused attention runs, what NCCL sums, the
// reserve of cuBLAS's workspaces. Every other op runs a portable ATen kernel on the GPU (products
// on cuBLAS, whose workspace is the reserve; convolutions through at::convolution), whose rule is
// the op table's.
#include "runtime/cuda/cuda_target.h"

#include "ir/attention_rules.h"
#include "runtime/cuda/library_reserve.h"

namespace gradc::runtime::cuda {
namespace {

using Types = std::span<const ir::TensorType>;

// What CUDA's fused kernel allocates beside the arena. Forward: its output and its log-sum-exp
// (f32, rows padded to a multiple of 32), and two RNG scalars. Backward: the log-sum-exp in that
// layout, dq, dk and dv, the row sums of dout * out (padded as the log-sum-exp), an f32
// accumulator of dq, and contiguous copies of dout and out (a bound: ATen's internals).
std::int64_t fusedForwardBytes(const ir::AttentionChunks& a) {
  using C = ir::AttentionChunks;
  const std::int64_t padded = (a.queries + 31) / 32 * 32;
  return C::grain(C::product({a.leading, a.queries, a.valueDim, a.elementBytes})) +
         C::grain(C::product({a.leading, padded, 4})) + 2 * ir::kAllocationGrain;
}

std::int64_t fusedBackwardBytes(const ir::AttentionChunks& a) {
  using C = ir::AttentionChunks;
  const std::int64_t padded = (a.queries + 31) / 32 * 32;
  const std::int64_t q = C::product({a.leading, a.queries, a.headDim});
  const std::int64_t out = C::product({a.leading, a.queries, a.valueDim});
  return 2 * C::grain(C::product({a.leading, padded, 4})) + C::grain(C::product({q, a.elementBytes})) +
         C::grain(C::product({a.leading, a.keys, a.headDim, a.elementBytes})) +
         C::grain(C::product({a.leading, a.keys, a.valueDim, a.elementBytes})) + C::grain(C::product({q, 4})) +
         2 * C::grain(C::product({out, a.elementBytes}));
}


// ATen's fused kernel where it runs the node (AttentionChunks::cudaFused), else the composed
// kernels' blocks (the op table's rule).
std::int64_t workspaceAttention(const ir::OpContext& c, Types) {
  const ir::AttentionChunks a = ir::attentionChunksOf(c, 0);
  return a.cudaFused(c.inputs[0].dtype == ir::DType::f32) ? fusedForwardBytes(a) : a.forwardBytes();
}
std::int64_t workspaceAttentionBackward(const ir::OpContext& c, Types) {
  const ir::AttentionChunks a = ir::attentionChunksOf(c, 1);
  return a.cudaFused(c.inputs[1].dtype == ir::DType::f32) ? fusedBackwardBytes(a) : a.backwardBytes();
}

bool ncclSums(ir::DType) { return true; }  // every dtype gradc trains in, bf16 included

}  // namespace

const ir::KernelTarget& kernelTarget() {
  static const ir::KernelTarget target({
      .name = "cuda",
      .communicator = "NCCL",
      .ranks = "GPU ranks",
      .sums = ncclSums,
      .kernelFormat = ir::KernelFormat::ptx,
      .libraryReserveBytes = kLibraryReserveBytes,
      .workspace = {{"attention", workspaceAttention}, {"attention_backward", workspaceAttentionBackward}},
  });
  return target;
}

}  // namespace gradc::runtime::cuda
