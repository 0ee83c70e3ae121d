#include "runtime/core/counter_rng.h"

#include <algorithm>

namespace gradc::runtime {
namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u;
constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kRounds = 10;

// SplitMix64's finaliser: a bijective 64-bit mixer with full avalanche.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

PhiloxKey keyFor(const RngStream& rng) {
  // Mixing the stream before combining keeps (seed, stream) and (seed', stream') with
  // seed ^ stream == seed' ^ stream' apart.
  std::uint64_t k = mix64(rng.seed + 0x9e3779b97f4a7c15ull * (mix64(static_cast<std::uint64_t>(rng.stream)) | 1));
  return {static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)};
}

// The top 24 bits as a float in [0, 1): exact, and never 1.0.
inline float toUniform(std::uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

// Philox over kBatch consecutive blocks, in structure-of-arrays form: the inner loops have a
// fixed trip count and no dependencies across j, so the compiler vectorises them (32x32->64
// multiplies map to pmuludq).
constexpr int kBatch = 16;

void philoxBatch(std::uint64_t firstBlock, PhiloxKey key, std::uint64_t step, float* out) {
  std::uint32_t c0[kBatch], c1[kBatch], c2[kBatch], c3[kBatch];
  for (int j = 0; j < kBatch; ++j) {
    std::uint64_t block = firstBlock + static_cast<std::uint64_t>(j);
    c0[j] = static_cast<std::uint32_t>(block);
    c1[j] = static_cast<std::uint32_t>(block >> 32);
    c2[j] = static_cast<std::uint32_t>(step);
    c3[j] = static_cast<std::uint32_t>(step >> 32);
  }
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < kRounds; ++r) {
    for (int j = 0; j < kBatch; ++j) {
      std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0[j];
      std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2[j];
      std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = static_cast<std::uint32_t>(p1);
      c3[j] = static_cast<std::uint32_t>(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int j = 0; j < kBatch; ++j) {
    out[4 * j + 0] = toUniform(c0[j]);
    out[4 * j + 1] = toUniform(c1[j]);
    out[4 * j + 2] = toUniform(c2[j]);
    out[4 * j + 3] = toUniform(c3[j]);
  }
}

PhiloxCounter counterFor(std::uint64_t block, std::uint64_t step) {
  return {static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32),
          static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(step >> 32)};
}

}  // namespace

PhiloxKey philoxKey(const RngStream& rng) { return keyFor(rng); }

PhiloxCounter philox4x32(PhiloxCounter c, PhiloxKey key) {
  for (int r = 0; r < kRounds; ++r) {
    std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c[0];
    std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ key[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ key[1], static_cast<std::uint32_t>(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return c;
}

float uniformAt(const RngStream& rng, std::int64_t index) {
  auto i = static_cast<std::uint64_t>(index);
  PhiloxCounter bits = philox4x32(counterFor(i / 4, static_cast<std::uint64_t>(rng.step)), keyFor(rng));
  return toUniform(bits[i % 4]);
}

void uniformFloats(const RngStream& rng, std::int64_t first, std::int64_t count, float* out) {
  const PhiloxKey key = keyFor(rng);
  const auto step = static_cast<std::uint64_t>(rng.step);
  auto i = static_cast<std::uint64_t>(first);
  const std::uint64_t end = i + static_cast<std::uint64_t>(count);
  float buffer[4 * kBatch];
  while (i < end) {
    std::uint64_t block = i / 4;
    std::uint64_t lane = i % 4;
    if (lane == 0 && end - i >= 4 * kBatch) {
      // Whole batches straight into the output.
      philoxBatch(block, key, step, out);
      out += 4 * kBatch;
      i += 4 * kBatch;
      continue;
    }
    // A ragged head or tail: compute one batch and copy the part inside [i, end).
    philoxBatch(block, key, step, buffer);
    std::uint64_t n = std::min<std::uint64_t>(4 * kBatch - lane, end - i);
    std::copy(buffer + lane, buffer + lane + n, out);
    out += n;
    i += n;
  }
}

}  // namespace gradc::runtime
