// PointerIndex: a map from the pointers of one graph (nodes, values) to dense ints, for the
// planners' hot loops (schedule, lower bounds), where std::unordered_map's node allocations
// and chained buckets dominated the time.
//
// Open addressing with linear probing over a power-of-two table at most half full; the hash
// is the pointer's bits times a 64-bit odd constant (Fibonacci hashing), top bits kept.
// Insert-only (graphs are rebuilt, never edited, while an index is alive); no iteration, so
// no result can depend on pointer values.
#pragma once

#include <cstdint>
#include <vector>

namespace gradc::passes {

class PointerIndex {
 public:
  explicit PointerIndex(size_t expected = 16) {
    size_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    reset(capacity);
  }

  // Inserts key -> value unless key is present; true when inserted.
  bool insert(const void* key, int value) {
    if (2 * (size_ + 1) > keys_.size()) grow();
    size_t slot = find(key);
    if (keys_[slot] == key) return false;
    keys_[slot] = key;
    values_[slot] = value;
    ++size_;
    return true;
  }
  // The value of key, or -1.
  int get(const void* key) const {
    size_t slot = find(key);
    return keys_[slot] == key ? values_[slot] : -1;
  }
  size_t size() const { return size_; }

 private:
  size_t find(const void* key) const {
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(key));
    size_t slot = static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> shift_);
    while (keys_[slot] != nullptr && keys_[slot] != key) slot = (slot + 1) & (keys_.size() - 1);
    return slot;
  }
  void reset(size_t capacity) {
    keys_.assign(capacity, nullptr);
    values_.assign(capacity, -1);
    shift_ = 64;
    for (size_t c = capacity; c > 1; c /= 2) --shift_;
    size_ = 0;
  }
  void grow() {
    std::vector<const void*> keys = std::move(keys_);
    std::vector<int> values = std::move(values_);
    reset(keys.size() * 2);
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != nullptr) insert(keys[i], values[i]);
  }

  std::vector<const void*> keys_;
  std::vector<int> values_;
  int shift_ = 60;
  size_t size_ = 0;
};

}  // namespace gradc::passes
