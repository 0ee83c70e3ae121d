// The CUDA device's attention kernels (the `attention` and `attention_backward` ops of
// ir/ops_attention.cpp).
//
// ATen's memory-efficient attention (LibTorch 2.x, CUTLASS's fused kernel), which never holds
// the [S, S_kv] scores, runs the node when the LibTorch has it and the node's types fit it
// (ir::AttentionChunks::cudaFused, the rule the plan follows): f32; no dropout (ATen draws its
// own mask, not gradc's stream); q, k and v of one leading shape (no shared key/value heads);
// head sizes multiples of 8. Operands whose rows are not contiguous, or whose strides or address
// are not multiples of 8 elements, are copied first (beside the plan). Its results are copied
// into the planned buffers.
//
// Every other node runs composed of ATen calls a block of queries at a time
// (runtime/kernels/attention_composite.h), with dropout drawn by gradc's CUDA dropout kernel at
// the stream positions of the unfused dropout op, so both paths, and the host's, drop the same
// elements.
//
// Memory beside the arena (ATen's caching allocator, measured as the device's internal bytes),
// declared as the node's workspace in a plan made for CUDA (ir/ops_attention.cpp): the fused
// kernel's results before they are copied -- the output and a log-sum-exp row padded to 32
// (forward); dq, dk, dv and the padded log-sum-exp (backward), with a bound for its internal
// buffers -- or the composed kernels' blocks (ir::AttentionChunks): linear in S apart from one
// bounded block of scores. (Where the LibTorch has no fused kernel, the composed kernels run
// every node, and a plan's fused-path workspace may be exceeded: the run names such steps.)
#pragma once

#include <span>

#include "runtime/kernels/kernels.h"

namespace gradc::runtime {

// attention and attention_backward on CUDA.
std::span<const KernelEntry> cudaAttentionKernels();

}  // namespace gradc::runtime
