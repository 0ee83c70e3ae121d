// Evaluator for integer size expressions; the grammar is in dim_expr.h.
//
// A recursive-descent parser that evaluates while it parses. Recursion happens only through
// '(' and unary signs, and both count against kMaxExprDepth, so deeply nested input fails
// with an error instead of overflowing the stack.
#include "frontend/dim_expr.h"

#include <algorithm>

#include "frontend/expr_scanner.h"

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

using expr::isDigit;
using expr::isNameChar;
using expr::isNameStart;

// A parsed sub-expression: its value and where it came from, for error messages.
struct Operand {
  std::int64_t value = 0;
  size_t begin = 0, end = 0;
  bool literal = false;  // a plain integer: its value is already visible in the text
};

class Parser : expr::Scanner {
 public:
  using Scanner::Scanner;

  ExprResult run() {
    ExprResult result;
    if (!empty("write an integer or a dim name, e.g. '4 * d_model'")) {
      std::optional<Operand> v = parseExpr();
      if (finished(v.has_value())) result.value = v->value;
    }
    if (failed_) result.error = std::move(error_);
    return result;
  }

 private:
  std::string operandValues(const Operand& a, const Operand* b) const {
    return Scanner::operandValues(a, b, [](std::int64_t v) { return std::to_string(v); });
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
      if (!enter(signPos)) return std::nullopt;
      std::optional<Operand> v = parseUnary();
      leave();
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
      if (!enter(open)) return std::nullopt;
      std::optional<Operand> inner = parseExpr();
      leave();
      if (!inner || !closeParen(open)) return std::nullopt;
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
    if (numberRunsIntoName(begin)) return std::nullopt;
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
    std::optional<std::int64_t> value = dim(span(begin, pos_), begin);
    if (!value) return std::nullopt;
    return Operand{*value, begin, pos_, false};
  }
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
