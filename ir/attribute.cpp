#include "ir/attribute.h"

#include <charconv>
#include <cmath>

namespace gradc::ir {

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
