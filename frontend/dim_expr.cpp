// Evaluator for integer size expressions; the grammar is in dim_expr.h.
//
// A recursive-descent parser that evaluates while it parses. Recursion happens only through
// '(' and unary signs, and both count against kMaxExprDepth, so deeply nested input fails
// with an error instead of overflowing the stack.
#include "frontend/dim_expr.h"

#include <algorithm>

#include "frontend/suggest.h"

namespace gradc::frontend {

void DimTable::set(std::string_view name, std::int64_t value) {
  auto [it, inserted] = index_.emplace(std::string(name), entries_.size());
  if (inserted)
    entries_.emplace_back(std::string(name), value);
  else
    entries_[it->second].second = value;
}

std::optional<std::int64_t> DimTable::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second].second;
}

std::vector<std::string> DimTable::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || isDigit(c); }
bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// A parsed sub-expression: its value and where it came from, for error messages.
struct Operand {
  std::int64_t value = 0;
  size_t begin = 0, end = 0;
  bool literal = false;  // a plain integer: its value is already visible in the text
};

class Parser {
 public:
  Parser(std::string_view text, const DimTable& dims) : text_(text), dims_(dims) {}

  ExprResult run() {
    ExprResult result;
    skipSpace();
    if (pos_ == text_.size()) {
      fail(0, "empty expression", "write an integer or a dim name, e.g. '4 * d_model'");
    } else if (std::optional<Operand> v = parseExpr(); v && !failed_) {
      skipSpace();
      if (pos_ < text_.size()) {
        if (text_[pos_] == ')')
          fail(pos_, "unmatched ')'");
        else
          fail(pos_, "expected an operator (+ - * /) but found " + describeTokenAt(pos_));
      } else {
        result.value = v->value;
      }
    }
    if (failed_) result.error = std::move(error_);
    return result;
  }

 private:
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

  std::string describeTokenAt(size_t at) const {
    if (at >= text_.size()) return "the end";
    char c = text_[at];
    if (isNameStart(c) || isDigit(c)) {
      size_t end = at;
      while (end < text_.size() && isNameChar(text_[end])) ++end;
      return "'" + std::string(span(at, end)) + "'";
    }
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      static const char* hex = "0123456789abcdef";
      return std::string("byte 0x") + hex[(c >> 4) & 0xf] + hex[c & 0xf];
    }
    return std::string("'") + c + "'";
  }

  // " (d_model=256, heads=3)": the values of the non-literal operands of an operation; a
  // compound operand reads " ('a * 3' is 12)".
  std::string operandValues(const Operand& a, const Operand* b) const {
    std::string out;
    for (const Operand* o : {&a, b}) {
      if (!o || o->literal) continue;
      if (!out.empty()) out += ", ";
      std::string_view text = span(o->begin, o->end);
      if (isIdentifier(text))
        out += std::string(text) + "=" + std::to_string(o->value);
      else
        out += "'" + std::string(text) + "' is " + std::to_string(o->value);
    }
    return out.empty() ? out : " (" + out + ")";
  }

  std::optional<Operand> parseExpr() {
    std::optional<Operand> lhs = parseTerm();
    while (lhs) {
      skipSpace();
      if (pos_ >= text_.size() || (text_[pos_] != '+' && text_[pos_] != '-')) break;
      char op = text_[pos_];
      size_t opPos = pos_++;
      std::optional<Operand> rhs = parseTerm();
      if (!rhs) return std::nullopt;
      std::int64_t r = 0;
      bool overflow = op == '+' ? __builtin_add_overflow(lhs->value, rhs->value, &r)
                                : __builtin_sub_overflow(lhs->value, rhs->value, &r);
      if (overflow) {
        fail(opPos, "'" + std::string(span(lhs->begin, rhs->end)) + "' overflows a 64-bit integer" +
                        operandValues(*lhs, &*rhs));
        return std::nullopt;
      }
      lhs = Operand{r, lhs->begin, rhs->end, false};
    }
    return lhs;
  }

  std::optional<Operand> parseTerm() {
    std::optional<Operand> lhs = parseUnary();
    while (lhs) {
      skipSpace();
      if (pos_ >= text_.size() || (text_[pos_] != '*' && text_[pos_] != '/')) break;
      char op = text_[pos_];
      size_t opPos = pos_++;
      std::optional<Operand> rhs = parseUnary();
      if (!rhs) return std::nullopt;
      std::string shown = "'" + std::string(span(lhs->begin, rhs->end)) + "'";
      std::int64_t r = 0;
      if (op == '*') {
        if (__builtin_mul_overflow(lhs->value, rhs->value, &r)) {
          fail(opPos, shown + " overflows a 64-bit integer" + operandValues(*lhs, &*rhs));
          return std::nullopt;
        }
      } else {
        if (rhs->value == 0) {
          fail(opPos, "division by zero in " + shown + operandValues(*lhs, &*rhs));
          return std::nullopt;
        }
        if (rhs->value == -1 && lhs->value == INT64_MIN) {
          fail(opPos, shown + " overflows a 64-bit integer" + operandValues(*lhs, &*rhs));
          return std::nullopt;
        }
        if (lhs->value % rhs->value != 0) {
          fail(opPos, shown + " does not divide evenly" + operandValues(*lhs, &*rhs),
               std::to_string(lhs->value) + " / " + std::to_string(rhs->value) + " leaves a remainder of " +
                   std::to_string(lhs->value % rhs->value) + "; sizes must divide exactly");
          return std::nullopt;
        }
        r = lhs->value / rhs->value;
      }
      lhs = Operand{r, lhs->begin, rhs->end, false};
    }
    return lhs;
  }

  std::optional<Operand> parseUnary() {
    skipSpace();
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
      char sign = text_[pos_];
      size_t signPos = pos_++;
      if (++depth_ > kMaxExprDepth) {
        fail(signPos, "expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
        return std::nullopt;
      }
      std::optional<Operand> v = parseUnary();
      --depth_;
      if (!v) return std::nullopt;
      if (sign == '-') {
        if (v->value == INT64_MIN) {
          fail(signPos, "'" + std::string(span(signPos, v->end)) + "' overflows a 64-bit integer");
          return std::nullopt;
        }
        // A negated literal is still a literal: "-1" needs no "(=-1)" in messages.
        return Operand{-v->value, signPos, v->end, v->literal};
      }
      return Operand{v->value, signPos, v->end, v->literal};
    }
    return parsePrimary();
  }

  std::optional<Operand> parsePrimary() {
    skipSpace();
    if (pos_ >= text_.size()) {
      fail(text_.size(), "incomplete expression: expected a number, a dim name or '(' at the end");
      return std::nullopt;
    }
    char c = text_[pos_];
    if (c == '(') {
      size_t open = pos_++;
      if (++depth_ > kMaxExprDepth) {
        fail(open, "expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
        return std::nullopt;
      }
      std::optional<Operand> inner = parseExpr();
      --depth_;
      if (!inner) return std::nullopt;
      skipSpace();
      if (pos_ >= text_.size()) {
        fail(open, "this '(' is never closed");
        return std::nullopt;
      }
      if (text_[pos_] != ')') {
        fail(pos_, "expected ')' or an operator but found " + describeTokenAt(pos_));
        return std::nullopt;
      }
      ++pos_;
      return Operand{inner->value, open, pos_, inner->literal};
    }
    if (isDigit(c)) return parseNumber();
    if (isNameStart(c)) return parseName();
    fail(pos_, "expected a number, a dim name or '(' but found " + describeTokenAt(pos_));
    return std::nullopt;
  }

  std::optional<Operand> parseNumber() {
    size_t begin = pos_;
    std::int64_t value = 0;
    bool overflow = false, malformed = false;
    char last = 0;
    while (pos_ < text_.size() && (isDigit(text_[pos_]) || text_[pos_] == '_')) {
      char c = text_[pos_++];
      if (c == '_') {
        if (last == '_') malformed = true;
      } else if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, c - '0', &value)) {
        overflow = true;
      }
      last = c;
    }
    if (last == '_') malformed = true;
    if (pos_ < text_.size() && isNameChar(text_[pos_])) {
      size_t end = pos_;
      while (end < text_.size() && isNameChar(text_[end])) ++end;
      std::string word(span(begin, end));
      fail(begin, "'" + word + "' is neither a number nor a name",
           "write '" + std::string(span(begin, pos_)) + " * " + std::string(span(pos_, end)) + "' for a product");
      return std::nullopt;
    }
    if (malformed) {
      fail(begin, "malformed number '" + std::string(span(begin, pos_)) + "'",
           "'_' may only separate digits, as in 40_000");
      return std::nullopt;
    }
    if (overflow) {
      fail(begin, "integer " + std::string(span(begin, pos_)) + " does not fit in 64 bits");
      return std::nullopt;
    }
    return Operand{value, begin, pos_, true};
  }

  std::optional<Operand> parseName() {
    size_t begin = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_])) ++pos_;
    std::string_view name = span(begin, pos_);
    std::optional<std::int64_t> value = dims_.find(name);
    if (!value) {
      std::vector<std::string> names = dims_.names();
      std::string hint = didYouMean(name, names);
      if (hint.empty())
        hint = names.empty() ? "no dims are defined here; add them under 'dims:'"
                             : "defined dims: " + quotedList(names);
      fail(begin, "'" + clip(name) + "' is not a defined dim", std::move(hint));
      error_.undefinedName = std::string(name);
      return std::nullopt;
    }
    return Operand{*value, begin, pos_, false};
  }

  std::string_view text_;
  const DimTable& dims_;
  size_t pos_ = 0;
  int depth_ = 0;
  bool failed_ = false;
  ExprError error_;
};

}  // namespace

ExprResult evalDimExpr(std::string_view text, const DimTable& dims) {
  if (text.size() > kMaxExprLength) {
    ExprResult result;
    result.error.message = "expression is longer than " + std::to_string(kMaxExprLength) + " characters";
    return result;
  }
  return Parser(text, dims).run();
}

bool isIdentifier(std::string_view name) {
  if (name.empty() || !isNameStart(name[0])) return false;
  return std::all_of(name.begin(), name.end(), isNameChar);
}

}  // namespace gradc::frontend
