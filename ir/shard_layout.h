// The layout of a sharded gradient bucket (ZeRO stages 1 and 2, passes/shard_state.h), shared by
// the op table (types, workspace), the passes and the kernels so that all three cut a bucket
// the same way.
//
// A bucket concatenates its parameters, flattened, in bucket order: L elements. Over N ranks
// every rank owns one contiguous shard of s = ceil(L / N) elements, rank r the flat range
// [r s, r s + s). The bucket is padded with zeros to N s elements, so every rank's shard (and
// its optimizer state) has exactly s elements; the padding is never written back to a
// parameter. A shard crosses parameter boundaries: its segments say which part of which
// parameter each stretch of the shard holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gradc::ir {

// The parameters a shard covers, in bucket order, from its shard_of attribute ("a,b,c").
inline std::vector<std::string> shardedNames(std::string_view shardOf) {
  std::vector<std::string> names;
  for (size_t begin = 0; begin <= shardOf.size();) {
    const size_t end = std::min(shardOf.find(',', begin), shardOf.size());
    names.emplace_back(shardOf.substr(begin, end - begin));
    begin = end + 1;
  }
  return names;
}

// Elements of each rank's shard of a bucket of `total` elements over `world` ranks.
inline std::int64_t shardSize(std::int64_t total, std::int64_t world) {
  return world <= 0 ? 0 : (total + world - 1) / world;
}

// One stretch of a shard: elements [begin, begin + length) of part `part` (flattened) sit at
// [shardOffset, shardOffset + length) of the shard.
struct ShardSegment {
  size_t part = 0;
  std::int64_t begin = 0;
  std::int64_t length = 0;
  std::int64_t shardOffset = 0;
};

// The segments of the shard [offset, offset + size) of the concatenation of parts with these
// element counts, in order; the shard's tail past the last part has no segment.
inline std::vector<ShardSegment> shardSegments(std::span<const std::int64_t> partNumels, std::int64_t offset,
                                               std::int64_t size) {
  std::vector<ShardSegment> out;
  std::int64_t partStart = 0;
  for (size_t i = 0; i < partNumels.size(); ++i) {
    const std::int64_t partEnd = partStart + partNumels[i];
    const std::int64_t lo = std::max(partStart, offset), hi = std::min(partEnd, offset + size);
    if (lo < hi) out.push_back(ShardSegment{i, lo - partStart, hi - lo, lo - offset});
    partStart = partEnd;
  }
  return out;
}

// The longest segment of that shard (0 when it holds no element).
inline std::int64_t longestSegment(std::span<const std::int64_t> partNumels, std::int64_t offset, std::int64_t size) {
  std::int64_t longest = 0;
  for (const ShardSegment& s : shardSegments(partNumels, offset, size)) longest = std::max(longest, s.length);
  return longest;
}

}  // namespace gradc::ir
