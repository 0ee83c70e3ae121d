#include "ir/attribute.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace gradc::ir {

namespace {

// The first entry of `items` (sorted by key) whose key is not less than `key`.
template <typename Items>
auto lowerBound(Items& items, std::string_view key) {
  return std::lower_bound(items.begin(), items.end(), key,
                          [](const AttrMap::value_type& entry, std::string_view k) { return entry.first.compare(k) < 0; });
}

}  // namespace

AttrMap::AttrMap(std::initializer_list<value_type> entries) {
  for (const value_type& e : entries) emplace(e.first, e.second);
}

const std::vector<AttrMap::value_type>& AttrMap::items() const {
  static const std::vector<value_type> none;
  return items_ ? *items_ : none;
}

std::vector<AttrMap::value_type>& AttrMap::own() {
  // The count is exact for the question asked: only this map can add a holder of an array it
  // holds alone.
  if (!items_) items_ = std::make_shared<std::vector<value_type>>();
  else if (items_.use_count() > 1) items_ = std::make_shared<std::vector<value_type>>(*items_);
  return *items_;
}

AttrMap::const_iterator AttrMap::find(std::string_view key) const {
  const std::vector<value_type>& all = items();
  auto it = lowerBound(all, key);
  return it != all.end() && it->first == key ? it : all.end();
}

std::pair<AttrMap::const_iterator, bool> AttrMap::emplace(std::string key, Attribute value) {
  if (const_iterator it = find(key); it != end()) return {it, false};
  std::vector<value_type>& all = own();
  auto at = lowerBound(all, key);
  at = all.insert(at, value_type{std::move(key), std::move(value)});
  return {at, true};
}

Attribute& AttrMap::operator[](std::string_view key) {
  std::vector<value_type>& all = own();
  auto at = lowerBound(all, key);
  if (at == all.end() || at->first != key) at = all.insert(at, value_type{std::string(key), Attribute{std::int64_t{0}}});
  return at->second;
}

size_t AttrMap::erase(std::string_view key) {
  if (find(key) == end()) return 0;
  std::vector<value_type>& all = own();
  all.erase(lowerBound(all, key));
  return 1;
}

AttrKind kindOf(const Attribute& attr) { return static_cast<AttrKind>(attr.index()); }

std::string_view attrKindName(AttrKind kind) {
  switch (kind) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Bool: return "bool";
    case AttrKind::String: return "string";
    case AttrKind::IntList: return "int list";
    case AttrKind::DType: return "dtype";
  }
  return "?";
}

namespace {

std::string floatToString(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[(c >> 4) & 0xf];
          out += hex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

struct AttrPrinter {
  std::string operator()(std::int64_t v) const { return std::to_string(v); }
  std::string operator()(double v) const { return floatToString(v); }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(const std::string& v) const { return quote(v); }
  std::string operator()(const std::vector<std::int64_t>& v) const {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }
  std::string operator()(DType v) const { return std::string(dtypeName(v)); }
};

template <class T>
std::optional<T> get(const AttrMap& attrs, std::string_view key) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return std::nullopt;
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return std::nullopt;
}

}  // namespace

std::string toString(const Attribute& attr) { return std::visit(AttrPrinter{}, attr); }

std::string toString(const AttrMap& attrs) {
  if (attrs.empty()) return "";
  std::string s = "{";
  bool first = true;
  for (const auto& [key, value] : attrs) {
    if (!first) s += ", ";
    first = false;
    s += key + " = " + toString(value);
  }
  return s + "}";
}

std::optional<std::int64_t> getInt(const AttrMap& a, std::string_view k) { return get<std::int64_t>(a, k); }
std::optional<double> getFloat(const AttrMap& a, std::string_view k) { return get<double>(a, k); }
std::optional<bool> getBool(const AttrMap& a, std::string_view k) { return get<bool>(a, k); }
std::optional<std::string> getString(const AttrMap& a, std::string_view k) { return get<std::string>(a, k); }
std::optional<std::vector<std::int64_t>> getIntList(const AttrMap& a, std::string_view k) {
  return get<std::vector<std::int64_t>>(a, k);
}
std::optional<DType> getDType(const AttrMap& a, std::string_view k) { return get<DType>(a, k); }

}  // namespace gradc::ir
