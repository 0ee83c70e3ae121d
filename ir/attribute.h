// Typed node and parameter attributes. An AttrMap is ordered by key, so printing is
// deterministic and independent of the order in which attributes were set.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace gradc::ir {

enum class AttrKind : std::uint8_t { Int, Float, Bool, String, IntList, DType };

using Attribute = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>, DType>;
using AttrMap = std::map<std::string, Attribute, std::less<>>;

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
