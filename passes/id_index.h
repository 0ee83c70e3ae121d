// IdIndex: a map from the values (or nodes) of one graph to ints, for the planners' hot loops
// (schedule, liveness, lower bounds): an array indexed by the dense id every value and node
// carries (ir::Value::id(), ir::Node::id()), so a lookup is one load, with no hashing and no
// probing. Sized by the graph's id bound; a key past it (a value created after the index) reads
// as absent and grows the array on insert. Keys must belong to the graph the index was made
// for: ids are unique within one graph only.
#pragma once

#include <cstddef>
#include <vector>

namespace gradc::passes {

template <class Key>
class IdIndex {
 public:
  IdIndex() = default;
  explicit IdIndex(size_t idBound) : slots_(idBound, -1) {}

  // Inserts key -> value unless key is present; true when inserted. Values are >= 0.
  bool insert(const Key* key, int value) {
    const size_t id = key->id();
    if (id >= slots_.size()) slots_.resize(id + 1, -1);
    if (slots_[id] >= 0) return false;
    slots_[id] = value;
    ++size_;
    return true;
  }
  // The value of key, or -1.
  int get(const Key* key) const {
    const size_t id = key->id();
    return id < slots_.size() ? slots_[id] : -1;
  }
  size_t size() const { return size_; }

 private:
  std::vector<int> slots_;
  size_t size_ = 0;
};

}  // namespace gradc::passes
