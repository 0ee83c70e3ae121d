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
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

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

}  // namespace gradc::ir
