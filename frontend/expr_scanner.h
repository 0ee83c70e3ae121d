// What the two expression evaluators of the spec language share (integer sizes, dim_expr.cpp;
// real attributes, float_expr.cpp): character classes, the cursor over the text, the first
// error with its offset, the nesting bound, the end-of-expression check and the names of the
// dims in messages. Internal to frontend/.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/dim_expr.h"
#include "frontend/suggest.h"

namespace gradc::frontend::expr {

inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
inline bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool isNameChar(char c) { return isNameStart(c) || isDigit(c); }
inline bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

class Scanner {
 public:
  Scanner(std::string_view text, const DimTable& dims) : text_(text), dims_(dims) {}

 protected:
  // After the whole expression parsed to `ok`: nothing may follow it. False after an error.
  bool finished(bool ok) {
    if (!ok || failed_) return false;
    skipSpace();
    if (pos_ == text_.size()) return true;
    if (text_[pos_] == ')')
      fail(pos_, "unmatched ')'");
    else
      fail(pos_, "expected an operator (+ - * /) but found " + describeTokenAt(pos_));
    return false;
  }
  // Before parsing: an empty text is an error with `hint`.
  bool empty(std::string_view hint) {
    skipSpace();
    if (pos_ != text_.size()) return false;
    fail(0, "empty expression", std::string(hint));
    return true;
  }

  void fail(size_t offset, std::string message, std::string hint = {}) {
    if (failed_) return;
    failed_ = true;
    error_.offset = offset;
    error_.message = std::move(message);
    error_.hint = std::move(hint);
  }
  void skipSpace() {
    while (pos_ < text_.size() && isSpace(text_[pos_])) ++pos_;
  }
  std::string_view span(size_t begin, size_t end) const { return text_.substr(begin, end - begin); }

  // "'d_model'", "'12'", "byte 0x1b", "the end": the token at `at`, for messages (a number's
  // '.' is part of its token when `fractions`).
  std::string describeTokenAt(size_t at) const {
    if (at >= text_.size()) return "the end";
    char c = text_[at];
    if (isNameStart(c) || isDigit(c)) {
      size_t end = at;
      while (end < text_.size() && (isNameChar(text_[end]) || (fractions_ && text_[end] == '.'))) ++end;
      return "'" + std::string(span(at, end)) + "'";
    }
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      static const char* hex = "0123456789abcdef";
      return std::string("byte 0x") + hex[(c >> 4) & 0xf] + hex[c & 0xf];
    }
    return std::string("'") + c + "'";
  }

  // " (d_model=256, 'd_model / heads' is 64)": the values of the operands of an operation that
  // are not literals (whose values the text already shows), each printed by `format`.
  template <typename Operand, typename Format>
  std::string operandValues(const Operand& a, const Operand* b, Format format) const {
    std::string out;
    for (const Operand* o : {&a, b}) {
      if (!o || o->literal) continue;
      if (!out.empty()) out += ", ";
      std::string_view text = span(o->begin, o->end);
      if (isIdentifier(text))
        out += std::string(text) + "=" + format(o->value);
      else
        out += "'" + std::string(text) + "' is " + format(o->value);
    }
    return out.empty() ? out : " (" + out + ")";
  }

  // A number's digits [begin, pos_) run straight into a name ("2heads"): an error suggesting a
  // product. True when it reported that.
  bool numberRunsIntoName(size_t begin) {
    if (pos_ >= text_.size() || !isNameChar(text_[pos_])) return false;
    size_t end = pos_;
    while (end < text_.size() && isNameChar(text_[end])) ++end;
    fail(begin, "'" + std::string(span(begin, end)) + "' is neither a number nor a name",
         "write '" + std::string(span(begin, pos_)) + " * " + std::string(span(pos_, end)) + "' for a product");
    return true;
  }

  // After a parenthesised expression opened at `open`: its ')', consumed. False (and an
  // error) when it is missing.
  bool closeParen(size_t open) {
    skipSpace();
    if (pos_ >= text_.size()) {
      fail(open, "this '(' is never closed");
      return false;
    }
    if (text_[pos_] != ')') {
      fail(pos_, "expected ')' or an operator but found " + describeTokenAt(pos_));
      return false;
    }
    ++pos_;
    return true;
  }

  // One more level of '(' or unary sign at `at`; false (and an error) past kMaxExprDepth.
  bool enter(size_t at) {
    if (++depth_ <= kMaxExprDepth) return true;
    fail(at, "expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
    return false;
  }
  void leave() { --depth_; }

  // The dim `name` at `begin`, or an error naming the closest dim.
  std::optional<std::int64_t> dim(std::string_view name, size_t begin) {
    std::optional<std::int64_t> value = dims_.find(name);
    if (value) return value;
    std::vector<std::string> names = dims_.names();
    std::string hint = didYouMean(name, names);
    if (hint.empty())
      hint = names.empty() ? "no dims are defined here; add them under 'dims:'" : "defined dims: " + quotedList(names);
    fail(begin, "'" + clip(name) + "' is not a defined dim", std::move(hint));
    error_.undefinedName = std::string(name);
    return std::nullopt;
  }

  std::string_view text_;
  const DimTable& dims_;
  bool fractions_ = false;  // numbers may have a fraction (real expressions)
  size_t pos_ = 0;
  int depth_ = 0;
  bool failed_ = false;
  ExprError error_;
};

}  // namespace gradc::frontend::expr
