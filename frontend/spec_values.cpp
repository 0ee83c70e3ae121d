// Typed reading of spec scalars; see spec_values.h.
#include "frontend/spec_values.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "frontend/float_expr.h"
#include "frontend/suggest.h"

namespace gradc::frontend {

namespace {

std::optional<std::string_view> scalarOr(const YamlNode& node, DiagSink& diags, std::string_view what,
                                         std::string_view expected) {
  if (node.isScalar()) return node.text;
  diags.error(node.pos, std::string(what) + " must be " + std::string(expected) + ", got " + describeNode(node));
  return std::nullopt;
}

bool looksFractional(std::string_view text) {
  return parseFloat(text).has_value() && text.find_first_of(".eE") != std::string_view::npos;
}

}  // namespace

std::optional<double> parseFloat(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  // from_chars takes an optional '-' but no '+'; allow a single leading '+' as YAML does.
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return std::nullopt;
  }
  if (text.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

void reportExprError(const YamlNode& node, const ExprError& error, DiagSink& diags) {
  diags.error(node.textPos(error.offset), error.message, error.hint);
}

std::optional<std::string_view> readScalar(const YamlNode& node, DiagSink& diags, std::string_view what) {
  return scalarOr(node, diags, what, "a single value");
}

std::optional<std::int64_t> readInt(const YamlNode& node, const DimTable& dims, DiagSink& diags,
                                    std::string_view what) {
  std::optional<std::string_view> text = scalarOr(node, diags, what, "an integer expression");
  if (!text) return std::nullopt;
  if (looksFractional(*text)) {
    diags.error(node.pos, std::string(what) + " must be an integer, got " + std::string(*text));
    return std::nullopt;
  }
  ExprResult r = evalDimExpr(*text, dims);
  if (!r.ok()) {
    reportExprError(node, r.error, diags);
    return std::nullopt;
  }
  return r.value;
}

std::optional<std::int64_t> readSize(const YamlNode& node, const DimTable& dims, DiagSink& diags,
                                     std::string_view what) {
  std::optional<std::int64_t> v = readInt(node, dims, diags, what);
  if (v && *v <= 0) {
    std::string shown(node.text);
    bool literal = shown == std::to_string(*v);
    diags.error(node.pos, std::string(what) + " must be a positive integer, but " +
                              (literal ? "it is " : "'" + shown + "' is ") + std::to_string(*v));
    return std::nullopt;
  }
  return v;
}

std::optional<std::vector<std::int64_t>> readIntList(const YamlNode& node, const DimTable& dims, DiagSink& diags,
                                                     std::string_view what, size_t maxItems) {
  if (!node.isSequence()) {
    diags.error(node.pos, std::string(what) + " must be a list of integer expressions such as [batch, seq], got " +
                              describeNode(node));
    return std::nullopt;
  }
  if (node.items.size() > maxItems) {
    diags.error(node.pos, std::string(what) + " has " + std::to_string(node.items.size()) +
                              " entries; at most " + std::to_string(maxItems) + " are allowed");
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  for (const YamlNode* item : node.items) {
    std::optional<std::int64_t> v = readInt(*item, dims, diags, std::string("an entry of ") + std::string(what));
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<double> readFloat(const YamlNode& node, const DimTable& dims, DiagSink& diags, std::string_view what) {
  std::optional<std::string_view> text = scalarOr(node, diags, what, "a number");
  if (!text) return std::nullopt;
  if (std::optional<double> v = parseFloat(*text)) return v;
  FloatExprResult r = evalFloatExpr(*text, dims);
  if (r.ok()) return r.value;
  diags.error(node.textPos(r.error.offset),
              std::string(what) + " must be a number or an expression such as 1 / sqrt(d_model): " + r.error.message,
              r.error.hint);
  return std::nullopt;
}

std::optional<bool> readBool(const YamlNode& node, DiagSink& diags, std::string_view what) {
  std::optional<std::string_view> text = scalarOr(node, diags, what, "true or false");
  if (!text) return std::nullopt;
  if (*text == "true" || *text == "True" || *text == "TRUE") return true;
  if (*text == "false" || *text == "False" || *text == "FALSE") return false;
  diags.error(node.pos, std::string(what) + " must be true or false, got " + describeNode(node));
  return std::nullopt;
}

std::optional<std::string_view> readIdentifier(const YamlNode& node, DiagSink& diags, std::string_view what) {
  std::optional<std::string_view> text = scalarOr(node, diags, what, "a name");
  if (!text) return std::nullopt;
  if (!isIdentifier(*text)) {
    diags.error(node.pos, std::string(what) + " must be a name made of letters, digits and '_' (not starting with a "
                              "digit), got " + describeNode(node));
    return std::nullopt;
  }
  return text;
}

bool checkKeys(const YamlNode& map, const std::vector<std::string>& allowed, DiagSink& diags,
               std::string_view owner, std::string_view noun, std::string_view fallbackHint) {
  for (const auto& [key, value] : map.entries) {
    if (!key->isScalar()) {
      diags.error(key->pos, "keys of " + std::string(owner) + " must be plain names, got " + describeNode(*key));
      return false;
    }
    if (std::find(allowed.begin(), allowed.end(), key->text) != allowed.end()) continue;
    std::string hint = didYouMean(key->text, allowed);
    diags.error(key->pos, std::string(owner) + " has no " + std::string(noun) + " '" + clip(key->text) + "'",
                hint.empty() ? std::string(fallbackHint) : hint);
    return false;
  }
  return true;
}

}  // namespace gradc::frontend
