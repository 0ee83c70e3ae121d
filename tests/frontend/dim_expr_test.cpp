// Integer size expressions: precedence, signs, errors (with the offending token's offset),
// overflow, exact division and the bounds that keep hostile input harmless.
#include "frontend/dim_expr.h"

#include <doctest/doctest.h>

#include <string>

using gradc::frontend::DimTable;
using gradc::frontend::evalDimExpr;
using gradc::frontend::ExprResult;

namespace {

DimTable dims() {
  DimTable t;
  t.set("batch", 16);
  t.set("d_model", 256);
  t.set("heads", 3);
  t.set("big", INT64_MAX);
  t.set("small", INT64_MIN);
  t.set("zero", 0);
  return t;
}

std::int64_t eval(const std::string& text) {
  ExprResult r = evalDimExpr(text, dims());
  INFO(text << ": " << r.error.message);
  REQUIRE(r.ok());
  return *r.value;
}

// Evaluates an expression that must fail; returns the error.
gradc::frontend::ExprError failure(const std::string& text) {
  ExprResult r = evalDimExpr(text, dims());
  INFO(text);
  REQUIRE_FALSE(r.ok());
  return r.error;
}

}  // namespace

TEST_CASE("integers, names and precedence") {
  CHECK(eval("42") == 42);
  CHECK(eval("40_000") == 40000);
  CHECK(eval("d_model") == 256);
  CHECK(eval("4 * d_model") == 1024);
  CHECK(eval("1 + 2 * 3") == 7);
  CHECK(eval("(1 + 2) * 3") == 9);
  CHECK(eval("10 - 4 - 3") == 3);        // left-associative
  CHECK(eval("64 / 4 / 2") == 8);        // left-associative
  CHECK(eval("d_model / 4 * 2") == 128);
  CHECK(eval("  batch*2  ") == 32);
}

TEST_CASE("unary signs") {
  CHECK(eval("-1") == -1);
  CHECK(eval("- -3") == 3);
  CHECK(eval("+5") == 5);
  CHECK(eval("-(2 + 3) * 2") == -10);
  CHECK(eval("2 * -3") == -6);
  CHECK(eval("small + 1") == INT64_MIN + 1);
}

TEST_CASE("syntax errors point at the offending token") {
  auto e = failure("4 * ");
  CHECK(e.offset == 4);
  CHECK(e.message.find("incomplete expression") != std::string::npos);

  e = failure("4 $ 2");
  CHECK(e.offset == 2);
  CHECK(e.message.find("'$'") != std::string::npos);

  e = failure("(1 + 2");
  CHECK(e.offset == 0);
  CHECK(e.message.find("never closed") != std::string::npos);

  e = failure("1 + 2)");
  CHECK(e.offset == 5);
  CHECK(e.message.find("unmatched ')'") != std::string::npos);

  e = failure("4d_model");
  CHECK(e.offset == 0);
  CHECK(e.hint.find("4 * d_model") != std::string::npos);

  e = failure("1__000");
  CHECK(e.message.find("malformed number") != std::string::npos);

  e = failure("");
  CHECK(e.message.find("empty expression") != std::string::npos);

  e = failure("batch heads");
  CHECK(e.offset == 6);
  CHECK(e.message.find("expected an operator") != std::string::npos);
}

TEST_CASE("undefined names suggest close matches") {
  auto e = failure("4 * d_modle");
  CHECK(e.offset == 4);
  CHECK(e.message == "'d_modle' is not a defined dim");
  CHECK(e.hint == "did you mean 'd_model'?");
  CHECK(e.undefinedName == "d_modle");

  e = failure("vocabulary");
  CHECK(e.hint.find("defined dims: 'batch'") == 0);

  e = evalDimExpr("x", DimTable{}).error;
  CHECK(e.hint.find("no dims are defined") != std::string::npos);
}

TEST_CASE("division is exact and never by zero") {
  CHECK(eval("d_model / 4") == 64);
  auto e = failure("d_model / heads");
  CHECK(e.offset == 8);
  CHECK(e.message == "'d_model / heads' does not divide evenly (d_model=256, heads=3)");
  CHECK(e.hint.find("remainder of 1") != std::string::npos);

  e = failure("batch / zero");
  CHECK(e.offset == 6);
  CHECK(e.message.find("division by zero") != std::string::npos);
  CHECK(e.message.find("zero=0") != std::string::npos);

  e = failure("7 / (2 - 2)");
  CHECK(e.message.find("division by zero") != std::string::npos);
}

TEST_CASE("every operation is overflow-checked") {
  auto e = failure("big + 1");
  CHECK(e.offset == 4);
  CHECK(e.message.find("overflows") != std::string::npos);
  CHECK(failure("small - 1").message.find("overflows") != std::string::npos);
  CHECK(failure("big * 2").message.find("overflows") != std::string::npos);
  CHECK(failure("-small").message.find("overflows") != std::string::npos);
  CHECK(failure("small / -1").message.find("overflows") != std::string::npos);
  CHECK(failure("99999999999999999999").message.find("does not fit in 64 bits") != std::string::npos);
  CHECK(eval("9223372036854775807") == INT64_MAX);
  CHECK(eval("-9223372036854775807 - 1") == INT64_MIN);
}

TEST_CASE("length and nesting are bounded") {
  // 100k nested parentheses: rejected by length, no recursion at all.
  std::string deep = std::string(100000, '(') + "1" + std::string(100000, ')');
  auto e = failure(deep);
  CHECK(e.message.find("longer than") != std::string::npos);

  // Within the length limit, nesting is bounded too.
  std::string nested = std::string(200, '(') + "1" + std::string(200, ')');
  e = failure(nested);
  CHECK(e.message.find("nests deeper than") != std::string::npos);
  std::string signs = std::string(300, '-') + "1";
  CHECK(failure(signs).message.find("nests deeper than") != std::string::npos);

  std::string ok = std::string(60, '(') + "1" + std::string(60, ')');
  CHECK(eval(ok) == 1);
}

TEST_CASE("DimTable keeps definition order and redefines in place") {
  DimTable t;
  t.set("a", 1);
  t.set("b", 2);
  t.set("a", 3);
  CHECK(t.names() == std::vector<std::string>{"a", "b"});
  CHECK(t.find("a") == 3);
  CHECK_FALSE(t.find("c").has_value());
}

TEST_CASE("identifiers") {
  using gradc::frontend::isIdentifier;
  CHECK(isIdentifier("d_model"));
  CHECK(isIdentifier("_"));
  CHECK_FALSE(isIdentifier("4x"));
  CHECK_FALSE(isIdentifier("a.b"));
  CHECK_FALSE(isIdentifier(""));
}
