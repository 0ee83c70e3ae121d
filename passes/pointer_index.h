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
  PointerIndex() : PointerIndex(16) {}
  explicit PointerIndex(size_t expected) {
    size_t capacity = 16;
    while (capacity < 2 * expected) capacity *= 2;
    reset(capacity);
  }

  // Inserts key -> value unless key is present; true when inserted.
  bool insert(const void* key, int value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    Slot& slot = slots_[find(key)];
    if (slot.key == key) return false;
    slot = Slot{key, value};
    ++size_;
    return true;
  }
  // The value of key, or -1.
  int get(const void* key) const {
    const Slot& slot = slots_[find(key)];
    return slot.key == key ? slot.value : -1;
  }
  size_t size() const { return size_; }

 private:
  size_t find(const void* key) const {
    const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(key));
    size_t slot = static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> shift_);
    while (slots_[slot].key != nullptr && slots_[slot].key != key) slot = (slot + 1) & (slots_.size() - 1);
    return slot;
  }
  void reset(size_t capacity) {
    slots_.assign(capacity, Slot{});
    shift_ = 64;
    for (size_t c = capacity; c > 1; c /= 2) --shift_;
    size_ = 0;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    reset(old.size() * 2);
    for (const Slot& s : old)
      if (s.key != nullptr) insert(s.key, s.value);
  }

  struct Slot {
    const void* key = nullptr;
    int value = -1;
  };
  std::vector<Slot> slots_;  // key and value side by side: one cache line per probe
  int shift_ = 60;
  size_t size_ = 0;
};

}  // namespace gradc::passes
