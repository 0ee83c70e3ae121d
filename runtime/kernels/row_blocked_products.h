// Matrix products on the host in blocks of output rows, so that what the BLAS library holds
// beside the arena does not grow with the batch.
//
// OpenBLAS packs the operands of every product into per-thread buffers it maps once and keeps
// for the life of the process. The pages it touches there stay resident, outside any plan, and
// for out = x @ rhs their number grows with x's row count (the batch's tokens or samples): on
// two threads, gpt-mini's products touched 3.75 MiB of each of the two buffers at batch 44 and
// 8.75 MiB at batch 108. A product computed in blocks of at most kProductRowBlock rows touches
// what one block needs, whatever the batch: about 1 MiB per thread. The blocks are row slices
// of the planned result (contiguous), so nothing is copied, and the blocked product runs as fast
// as the whole one: 0.93x-1.05x of its time on one and two threads at gpt-mini's shapes with
// 16,384 rows (bench/row_blocked_products.py). Products whose rows are the contraction (the weight
// gradient, x^T @ g) already touch a bounded panel: the library blocks the contraction itself.
// Up to one block, a product is one library call; a small one (few rows or terms, f32) runs on
// the tile kernels instead (runtime/kernels/host_products.h). The host's kernels call this; the
// portable ones (runtime/kernels/kernels.h) make one call whatever the rows.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace gradc::runtime {

inline constexpr std::int64_t kProductRowBlock = 1024;

// out2d[m, n] = x2d[m, k] @ rhs[k, n] (+ bias[n] when bias is given), with ATen's mm / addmm
// per block of at most kProductRowBlock rows. out2d must be contiguous; x2d and rhs may be
// strided as ATen's mm accepts them.
void productInRowBlocks(const at::Tensor& out2d, const at::Tensor& x2d, const at::Tensor& rhs,
                        const at::Tensor* bias = nullptr);

}  // namespace gradc::runtime
