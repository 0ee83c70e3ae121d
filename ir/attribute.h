// Typed node and parameter attributes. An AttrMap is ordered by key, so printing is
// deterministic and independent of the order in which attributes were set.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace gradc::ir {

enum class AttrKind : std::uint8_t { Int, Float, Bool, String, IntList, DType };

using Attribute = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, DType>;

// Attributes by key, in key order. Copies share one immutable array of entries until one of
// them is changed (copy on write): the many nodes a pass builds from one map (an optimizer's
// updates; nodes copied by micro-batching, cloning and recompute) hold one array, and an
// empty map holds none. Reads go through the const interface only; the changing calls
// (emplace, operator[], erase) copy a shared array first.
class AttrMap {
 public:
  using value_type = std::pair<std::string, Attribute>;
  using const_iterator = std::vector<value_type>::const_iterator;

  AttrMap() = default;
  // Entries in any order; of repeated keys the first is kept (as std::map's constructor does).
  AttrMap(std::initializer_list<value_type> entries);

  bool empty() const { return !items_ || items_->empty(); }
  size_t size() const { return items_ ? items_->size() : 0; }
  const_iterator begin() const { return items().begin(); }
  const_iterator end() const { return items().end(); }
  const_iterator find(std::string_view key) const;
  size_t count(std::string_view key) const { return find(key) != end() ? 1 : 0; }
  bool contains(std::string_view key) const { return find(key) != end(); }

  // Inserts key = value unless the key is present; the entry, and whether it was inserted.
  std::pair<const_iterator, bool> emplace(std::string key, Attribute value);
  // The value of key, inserted (as integer 0) when absent.
  Attribute& operator[](std::string_view key);
  size_t erase(std::string_view key);

  friend bool operator==(const AttrMap& a, const AttrMap& b) {
    return a.items_ == b.items_ || a.items() == b.items();
  }

 private:
  const std::vector<value_type>& items() const;
  // The entries, unshared: copied first when another map holds them too.
  std::vector<value_type>& own();

  std::shared_ptr<std::vector<value_type>> items_;  // nullptr: empty
};

AttrKind kindOf(const Attribute& attr);
std::string_view attrKindName(AttrKind kind);

// IR text spelling: 3, -1.5, 1e-05, true, "tanh", [16, 128], f32. Floats print in the
// shortest form that parses back to the same double, and always carry a '.', 'e', "inf" or
// "nan" so that they never read back as integers.
std::string toString(const Attribute& attr);
std::string toString(const AttrMap& attrs);  // "{eps = 1e-05, p = 0.1}", "" when empty

// Typed lookups; the verifier guarantees the kind for attributes in an op's schema.
std::optional<std::int64_t> getInt(const AttrMap& attrs, std::string_view key);
std::optional<double> getFloat(const AttrMap& attrs, std::string_view key);
std::optional<bool> getBool(const AttrMap& attrs, std::string_view key);
std::optional<std::string> getString(const AttrMap& attrs, std::string_view key);
std::optional<std::vector<std::int64_t>> getIntList(const AttrMap& attrs, std::string_view key);
std::optional<DType> getDType(const AttrMap& attrs, std::string_view key);

}  // namespace gradc::ir
