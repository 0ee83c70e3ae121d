// How the fused attention kernels (runtime/kernels/kernels_attention.cpp) tile their work, and so what
// they declare as workspace (ir/ops_attention.cpp). Shared by the op table and the kernel, so the
// kernel allocates exactly the planned bytes.
//
// Each thread of the intra-op pool owns one slot of the workspace and never holds more than one
// tile of scores: rows [i0, i0 + queryRows) of the queries against keys [j0, j0 + keyRows). A
// slot holds, in elements of the operands' dtype (the uniforms of dropout are floats, stored in
// `keyRows` elements, which are at least as wide):
//
//   forward:  q tile [Br, Dh], k tile [Bc, Dh], v tile [Bc, Dv], scores [Br, Bc], the output
//             accumulator [Br, Dv], the running maximum and sum [Br] each, uniforms [Bc] (dropout)
//   backward: q tile [Br, Dh], dO tile [Br, Dv], k tile [Bc, Dh], v tile [Bc, Dv], scores and
//             probabilities [Br, Bc], dP [Br, Bc], dK and dV accumulators [Bc, Dh] and [Bc, Dv],
//             the tile's log-sum-exp and rowsum(dO * O) [Br] each, uniforms [Bc] (dropout)
//
// with Br = min(kQueryTileRows, S) and Bc = min(kKeyTileRows, S_kv).
//
// Off the host the ops run as ATen calls (runtime/kernels/attention_composite.h), a block of
// query rows at a time over all leading indices together: AttentionChunks says how many rows,
// and bounds the bytes those calls allocate (the op's workspace when a plan is made for CUDA).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>

namespace gradc::ir {

inline constexpr std::int64_t kQueryTileRows = 64;
inline constexpr std::int64_t kKeyTileRows = 256;

struct AttentionTiling {
  std::int64_t queryRows = 0;  // Br
  std::int64_t keyRows = 0;    // Bc
  std::int64_t headDim = 0;    // Dh (queries and keys)
  std::int64_t valueDim = 0;   // Dv
  bool dropout = false;

  static AttentionTiling of(std::int64_t queries, std::int64_t keys, std::int64_t headDim, std::int64_t valueDim,
                            bool dropout) {
    return {std::min(kQueryTileRows, queries), std::min(kKeyTileRows, keys), headDim, valueDim, dropout};
  }

  std::int64_t uniforms() const { return dropout ? keyRows : 0; }

  // The parts of one thread's slot, in the order the kernels carve them (elements each).
  // forward: q tile, k tile, v tile, scores, output accumulator, running max, running sum, uniforms
  std::array<std::int64_t, 8> forwardParts() const {
    const std::int64_t br = queryRows, bc = keyRows;
    return {br * headDim, bc * headDim, bc * valueDim, br * bc, br * valueDim, br, br, uniforms()};
  }
  // backward: q tile, dO tile, k tile, v tile, probabilities, dP, dK and dV accumulators, the
  // tile's log-sum-exp, rowsum(dO * O), uniforms
  std::array<std::int64_t, 11> backwardParts() const {
    const std::int64_t br = queryRows, bc = keyRows;
    return {br * headDim, br * valueDim, bc * headDim, bc * valueDim, br * bc, br * bc, bc * headDim, bc * valueDim,
            br, br, uniforms()};
  }
  std::int64_t forwardSlot() const { return total(forwardParts()); }
  std::int64_t backwardSlot() const { return total(backwardParts()); }

 private:
  template <size_t N>
  static std::int64_t total(const std::array<std::int64_t, N>& parts) {
    std::int64_t sum = 0;
    for (std::int64_t p : parts) sum += p;
    return sum;
  }
};

// The composed kernels' blocks: `rows` queries of every leading index, so that one [L, rows, S_kv]
// score block holds at most kChunkScoreBytes (at least one row). Their allocations, largest first:
//
//   whole call: contiguous [L, S, D] copies of q, k and v (and dout and out backward) when their
//               leading axes cannot be merged in place; dk and dv accumulators over the expanded
//               heads, and their sums down to k's and v's shape, when keys and values are shared
//   per block:  the scores [L, rows, S_kv], reused for the probabilities and then dS; backward,
//               dP and (with dropout) the dropped probabilities, of the same shape; the causal
//               mask [rows, S_kv] of bools; row statistics [L, rows] (three); a contiguous copy
//               of q's block [L, rows, Dh] (and dout's [L, rows, Dv] backward) where a product
//               needs one; forward the block's output [L, rows, Dv]; backward dout * out
//               [L, rows, Dv] and dq's block [L, rows, Dh]
//
// Every allocation is counted rounded up to kAllocationGrain bytes (CUDA's caching allocator's
// granularity), so the bound holds on the host's allocator and on the device's.
inline constexpr std::int64_t kChunkScoreBytes = std::int64_t{32} << 20;
inline constexpr std::int64_t kAllocationGrain = 512;

struct AttentionChunks {
  std::int64_t leading = 1;    // L: the product of q's leading axes
  std::int64_t kvLeading = 1;  // the product of k's (and v's) leading axes: L, or less when heads are shared
  std::int64_t queries = 0, keys = 0, headDim = 0, valueDim = 0;
  std::int64_t elementBytes = 4;
  bool causal = false, dropout = false;

  bool sharedHeads() const { return kvLeading != leading; }

  // Whether CUDA's fused kernel (runtime/cuda/cuda_attention.h) runs the node: f32 (`f32`), no
  // dropout, no shared heads, head sizes multiples of 8. Decided by types alone, so a plan and
  // the kernel agree on the path (operands whose layout does not fit are copied).
  bool cudaFused(bool f32) const {
    return f32 && !dropout && !sharedHeads() && headDim % 8 == 0 && valueDim % 8 == 0;
  }

  // Query rows per block.
  std::int64_t rows() const {
    const std::int64_t perRow = std::max<std::int64_t>(product({leading, keys, elementBytes}), 1);
    return std::clamp<std::int64_t>(kChunkScoreBytes / perRow, 1, std::max<std::int64_t>(queries, 1));
  }

  std::int64_t forwardBytes() const {
    const std::int64_t r = rows();
    const std::int64_t whole = sized({leading, queries, headDim}) + sized({leading, keys, headDim}) +
                               sized({leading, keys, valueDim});
    return whole + sized({leading, r, keys}) + masks(r) + 3 * sized({leading, r}) + sized({leading, r, headDim}) +
           sized({leading, r, valueDim});
  }

  std::int64_t backwardBytes() const {
    const std::int64_t r = rows();
    std::int64_t whole = sized({leading, queries, headDim}) + sized({leading, keys, headDim}) +
                         sized({leading, keys, valueDim}) + 2 * sized({leading, queries, valueDim});
    if (sharedHeads())
      whole += sized({leading, keys, headDim}) + sized({leading, keys, valueDim}) + sized({kvLeading, keys, headDim}) +
               sized({kvLeading, keys, valueDim});
    const std::int64_t scoreBlocks = dropout ? 3 : 2;
    return whole + scoreBlocks * sized({leading, r, keys}) + masks(r) + 3 * sized({leading, r}) +
           2 * sized({leading, r, headDim}) + 2 * sized({leading, r, valueDim});
  }

  // Bytes rounded up to the allocation grain.
  static std::int64_t grain(std::int64_t bytes) {
    return bytes <= 0 ? 0 : (bytes + kAllocationGrain - 1) / kAllocationGrain * kAllocationGrain;
  }
  // A product of extents, saturating at 2^56 (far beyond any device, and summable without
  // overflow).
  static std::int64_t product(std::initializer_list<std::int64_t> factors) {
    constexpr std::int64_t kCap = std::int64_t{1} << 56;
    std::int64_t p = 1;
    for (std::int64_t f : factors)
      if (__builtin_mul_overflow(p, f, &p) || p > kCap) return kCap;
    return p;
  }

 private:
  std::int64_t sized(std::initializer_list<std::int64_t> extents) const {
    std::int64_t elements = product(extents);
    return grain(product({elements, elementBytes}));
  }
  std::int64_t masks(std::int64_t r) const { return causal ? grain(product({r, keys})) : 0; }
};

}  // namespace gradc::ir
