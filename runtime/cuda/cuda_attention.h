// The CUDA device's attention kernels (the `attention` and `attention_backward` ops of
// ir/ops_attention.cpp): ATen's memory-efficient attention (LibTorch 2.x, CUTLASS's fused
// kernel), which never holds the [S, S_kv] scores, in place of the portable kernels' ATen
// decomposition, which does.
//
// Used when the LibTorch has it and the node fits it: f32, f16 or bf16; no dropout (ATen draws
// its own mask, not gradc's stream: the portable kernel then refuses, as on any device without
// the host's tiled kernel); q, k and v of one leading shape (no shared key/value heads) of rank
// 3 or more, each with contiguous rows whose length and strides are multiples of 8 elements.
// Otherwise the portable kernel runs.
//
// Memory beside the arena (ATen's caching allocator, measured as the device's internal bytes):
// the kernel's own results before they are copied into the planned buffers -- the output and a
// log-sum-exp row padded to 32 (forward); dq, dk, dv and the padded log-sum-exp (backward):
// linear in S, never S x S_kv.
#pragma once

#include <span>

#include "runtime/kernels/kernels.h"

namespace gradc::runtime {

// attention and attention_backward on CUDA; empty where the LibTorch has no fused attention.
std::span<const KernelEntry> cudaAttentionKernels();

}  // namespace gradc::runtime
