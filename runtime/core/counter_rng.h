// Counter-based random numbers: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the generator cuRAND and PyTorch's CUDA backend use.
//
// There is no generator state. The value drawn for element i of a random node (i = row-major
// position in the tensor's logical shape, whatever its memory layout) is a pure function of
// (run seed, training step, the node's stream key, i):
//
//   key     = (k0, k1)  from a 64-bit mix of (seed, stream)
//   counter = (block lo, block hi, step lo, step hi)   where block = i / 4
//   bits    = Philox4x32-10(counter, key)[i % 4]
//
// so a recomputed node, a resumed run or a different thread count reproduce every value bit
// for bit, and the autodiff pass can implement dropout's gradient as the same dropout op with
// the same key (the backward mask equals the forward mask). Different streams, steps or seeds
// give independent streams (different Philox keys or counters).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace gradc::runtime {

using PhiloxCounter = std::array<std::uint32_t, 4>;
using PhiloxKey = std::array<std::uint32_t, 2>;

// One Philox-4x32-10 block: 128 random bits for one (counter, key). Matches the Random123
// reference implementation (checked against its known-answer vectors in the tests).
PhiloxCounter philox4x32(PhiloxCounter counter, PhiloxKey key);

// The random stream of one random node at one step.
struct RngStream {
  std::uint64_t seed = 0;    // run seed (RunContext::seed)
  std::int64_t step = 0;     // training step (RunContext::step)
  std::int64_t stream = 0;   // the node's "rng" attribute
};

// The Philox key of a stream (what every element of it is drawn under).
PhiloxKey philoxKey(const RngStream& rng);

// Uniform floats in [0, 1), multiples of 2^-24: out[j] = u(first + j) for j in [0, count).
// Independent of how a range is split into calls, so parallel loops may split it freely.
void uniformFloats(const RngStream& rng, std::int64_t first, std::int64_t count, float* out);

// The uniform float of element `index` (the reference definition; uniformFloats is the
// batched form and must agree with it).
float uniformAt(const RngStream& rng, std::int64_t index);

// Dropout with probability p keeps element i exactly when u(i) >= dropoutThreshold(p): p rounded
// up to the uniforms' 2^-24 grid (every dropout kernel, on every device, compares with it).
inline float dropoutThreshold(double p) { return static_cast<float>(std::ceil(p * 16777216.0) / 16777216.0); }

}  // namespace gradc::runtime
