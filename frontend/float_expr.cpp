// Evaluator for real-valued attribute expressions; the grammar is in float_expr.h.
//
// A recursive-descent parser that evaluates while it parses, like the integer one
// (dim_expr.cpp), on the same scanner (expr_scanner.h): recursion only through '(', function
// calls and unary signs, each counted against kMaxExprDepth.
#include "frontend/float_expr.h"

#include <charconv>
#include <cmath>
#include <string>

#include "frontend/expr_scanner.h"

namespace gradc::frontend {

namespace {

using expr::isDigit;
using expr::isNameChar;
using expr::isNameStart;

struct Operand {
  double value = 0;
  size_t begin = 0, end = 0;
  bool literal = false;
};

// The shortest text that reads back as v: 0.125, 16, 1e-05.
std::string shortest(double v) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(v);
}

class Parser : expr::Scanner {
 public:
  Parser(std::string_view text, const DimTable& dims) : Scanner(text, dims) { fractions_ = true; }

  FloatExprResult run() {
    FloatExprResult result;
    if (!empty("write a number or an expression over dims, e.g. '1 / sqrt(d_model / heads)'")) {
      std::optional<Operand> v = parseExpr();
      if (finished(v.has_value())) result.value = v->value;
    }
    if (failed_) result.error = std::move(error_);
    return result;
  }

 private:
  std::string operandValues(const Operand& a, const Operand* b) const {
    return Scanner::operandValues(a, b, shortest);
  }

  // Every intermediate must stay finite: a huge dim product is an error, not inf.
  std::optional<Operand> finite(Operand o, size_t at, const Operand& a, const Operand* b) {
    if (std::isfinite(o.value)) return o;
    fail(at, "'" + std::string(span(o.begin, o.end)) + "' is not a finite number" + operandValues(a, b));
    return std::nullopt;
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
      Operand r{op == '+' ? lhs->value + rhs->value : lhs->value - rhs->value, lhs->begin, rhs->end, false};
      lhs = finite(r, opPos, *lhs, &*rhs);
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
      if (op == '/' && rhs->value == 0) {
        fail(opPos, "division by zero in '" + std::string(span(lhs->begin, rhs->end)) + "'" +
                        operandValues(*lhs, &*rhs));
        return std::nullopt;
      }
      Operand r{op == '*' ? lhs->value * rhs->value : lhs->value / rhs->value, lhs->begin, rhs->end, false};
      lhs = finite(r, opPos, *lhs, &*rhs);
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
      return Operand{sign == '-' ? -v->value : v->value, signPos, v->end, v->literal};
    }
    return parsePrimary();
  }

  std::optional<Operand> parseParenthesised(size_t open) {
    if (!enter(open)) return std::nullopt;
    std::optional<Operand> inner = parseExpr();
    leave();
    if (!inner || !closeParen(open)) return std::nullopt;
    return inner;
  }

  std::optional<Operand> parsePrimary() {
    skipSpace();
    if (pos_ >= text_.size()) {
      fail(text_.size(), "incomplete expression: expected a number, a dim name, a function or '(' at the end");
      return std::nullopt;
    }
    char c = text_[pos_];
    if (c == '(') {
      size_t open = pos_++;
      std::optional<Operand> inner = parseParenthesised(open);
      if (!inner) return std::nullopt;
      return Operand{inner->value, open, pos_, inner->literal};
    }
    if (isDigit(c) || c == '.') return parseNumber();
    if (isNameStart(c)) return parseName();
    fail(pos_, "expected a number, a dim name, a function or '(' but found " + describeTokenAt(pos_));
    return std::nullopt;
  }

  std::optional<Operand> parseNumber() {
    size_t begin = pos_;
    while (pos_ < text_.size() && (isDigit(text_[pos_]) || text_[pos_] == '.')) ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < text_.size() && (text_[e] == '+' || text_[e] == '-')) ++e;
      if (e < text_.size() && isDigit(text_[e])) {
        pos_ = e;
        while (pos_ < text_.size() && isDigit(text_[pos_])) ++pos_;
      }
    }
    if (numberRunsIntoName(begin)) return std::nullopt;
    double value = 0;
    std::string_view digits = span(begin, pos_);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, std::chars_format::general);
    if (ec != std::errc() || end != digits.data() + digits.size() || !std::isfinite(value)) {
      fail(begin, "malformed number '" + std::string(digits) + "'", "write numbers as 3, 0.1 or 1e-5");
      return std::nullopt;
    }
    return Operand{value, begin, pos_, true};
  }

  std::optional<Operand> parseName() {
    size_t begin = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_])) ++pos_;
    std::string_view name = span(begin, pos_);
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '(') return parseCall(name, begin);
    std::optional<std::int64_t> value = dim(name, begin);
    if (!value) return std::nullopt;
    return Operand{static_cast<double>(*value), begin, begin + name.size(), false};
  }

  std::optional<Operand> parseCall(std::string_view name, size_t begin) {
    static const std::vector<std::string> functions = {"sqrt", "exp", "log"};
    if (name != "sqrt" && name != "exp" && name != "log") {
      std::string hint = didYouMean(name, functions);
      fail(begin, "'" + clip(name) + "' is not a function", hint.empty() ? "functions: sqrt, exp, log" : hint);
      return std::nullopt;
    }
    size_t open = pos_++;
    std::optional<Operand> arg = parseParenthesised(open);
    if (!arg) return std::nullopt;
    Operand call{0, begin, pos_, false};
    const double x = arg->value;
    if ((name == "sqrt" && x < 0) || (name == "log" && x <= 0)) {
      fail(begin, std::string(name) + " of " + shortest(x) + " is not a real number" + operandValues(*arg, nullptr));
      return std::nullopt;
    }
    call.value = name == "sqrt" ? std::sqrt(x) : name == "exp" ? std::exp(x) : std::log(x);
    return finite(call, begin, *arg, nullptr);
  }

};

}  // namespace

FloatExprResult evalFloatExpr(std::string_view text, const DimTable& dims) {
  if (text.size() > kMaxExprLength) {
    FloatExprResult result;
    result.error.message = "expression is longer than " + std::to_string(kMaxExprLength) + " characters";
    return result;
  }
  return Parser(text, dims).run();
}

}  // namespace gradc::frontend
