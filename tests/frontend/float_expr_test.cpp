// Real-valued attribute expressions: values (exactly what C++ computes for the same formula),
// precedence, functions, and every error at its token with the operands' values.
#include "frontend/float_expr.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "frontend/spec.h"

using gradc::frontend::DimTable;
using gradc::frontend::evalFloatExpr;
using gradc::frontend::FloatExprResult;

namespace {

DimTable dims() {
  DimTable t;
  t.set("d_model", 768);
  t.set("heads", 12);
  t.set("zero", 0);
  t.set("big", INT64_MAX);
  return t;
}

double eval(const std::string& text) {
  FloatExprResult r = evalFloatExpr(text, dims());
  INFO(text << ": " << r.error.message);
  REQUIRE(r.ok());
  return *r.value;
}

gradc::frontend::ExprError failure(const std::string& text) {
  FloatExprResult r = evalFloatExpr(text, dims());
  INFO(text);
  REQUIRE_FALSE(r.ok());
  return r.error;
}

}  // namespace

TEST_CASE("float expressions: numbers, dims, precedence and functions") {
  CHECK(eval("0.1") == 0.1);
  CHECK(eval("1e-5") == 1e-5);
  CHECK(eval(".5") == 0.5);
  CHECK(eval("3") == 3.0);
  CHECK(eval("1 / sqrt(d_model / heads)") == 1.0 / std::sqrt(768.0 / 12.0));  // 0.125 exactly
  CHECK(eval("1 / sqrt(d_model / heads)") == 0.125);
  CHECK(eval("1 - 0.9") == 1.0 - 0.9);
  CHECK(eval("2 + 3 * 4") == 14.0);
  CHECK(eval("(2 + 3) * 4") == 20.0);
  CHECK(eval("-2 * -3") == 6.0);
  CHECK(eval("d_model / 7") == 768.0 / 7.0);  // real division, no remainder error
  CHECK(eval("exp(0)") == 1.0);
  CHECK(eval("log(exp(2))") == std::log(std::exp(2.0)));
  CHECK(eval("sqrt (4)") == 2.0);
  CHECK(eval("2.5e+2") == 250.0);
}

TEST_CASE("float expressions: errors name the token and the operands' values") {
  gradc::frontend::ExprError e = failure("1 / zero");
  CHECK(e.offset == 2);
  CHECK(e.message == "division by zero in '1 / zero' (zero=0)");

  e = failure("sqrt(1 - d_model)");
  CHECK(e.offset == 0);
  CHECK(e.message == "sqrt of -767 is not a real number ('1 - d_model' is -767)");

  e = failure("log(zero)");
  CHECK(e.message == "log of 0 is not a real number (zero=0)");

  e = failure("1 / sqrt(d_modle)");
  CHECK(e.offset == 9);
  CHECK(e.message == "'d_modle' is not a defined dim");
  CHECK(e.hint == "did you mean 'd_model'?");

  e = failure("sqr(4)");
  CHECK(e.message == "'sqr' is not a function");
  CHECK(e.hint == "did you mean 'sqrt'?");

  e = failure("exp(big)");
  CHECK(e.message == "'exp(big)' is not a finite number (big=9223372036854775808)");

  CHECK(failure("2 *").message.find("incomplete expression") == 0);
  CHECK(failure("(1 + 2").message == "this '(' is never closed");
  CHECK(failure("1 2").message == "expected an operator (+ - * /) but found '2'");
  CHECK(failure("1.2.3").message == "malformed number '1.2.3'");
  CHECK(failure("2heads").hint == "write '2 * heads' for a product");
  CHECK(failure("").message == "empty expression");
  CHECK(failure(std::string(100, '(') + "1" + std::string(100, ')')).message.find("nests deeper") != std::string::npos);
  CHECK(failure(std::string(2000, '1')).message.find("longer than") != std::string::npos);
}

TEST_CASE("float attributes in a spec take expressions, with errors at line:col") {
  const std::string head =
      "model: t\n"
      "dims: {batch: 2, d: 64, heads: 4}\n"
      "inputs:\n"
      "  x: {shape: [batch, d]}\n"
      "  y: {shape: [batch, d]}\n"
      "layers:\n";
  gradc::frontend::SpecResult ok =
      gradc::frontend::compileSpec(head + "  - {op: scale, input: x, by: 1 / sqrt(d / heads)}\nloss: {op: mse, target: y}\n",
                                   "t.yaml");
  REQUIRE(ok.ok());
  bool found = false;
  for (const auto& n : ok.graph->nodes())
    if (n->opName() == "scale") {
      CHECK(gradc::ir::getFloat(n->attrs(), "factor").value_or(0) == 0.25);
      found = true;
    }
  CHECK(found);

  gradc::frontend::SpecResult bad =
      gradc::frontend::compileSpec(head + "  - {op: scale, input: x, by: 1 / sqrt(d / head)}\nloss: {op: mse, target: y}\n",
                                   "t.yaml");
  REQUIRE_FALSE(bad.ok());
  const gradc::frontend::Diagnostic& d = bad.diagnostics.back();
  CHECK(d.line == 7);
  CHECK(d.column == 44);  // the 'head' token
  CHECK(d.message == "attribute 'by' of scale must be a number or an expression such as 1 / sqrt(d_model): 'head' is "
                     "not a defined dim");
  CHECK(d.hint == "did you mean 'heads'?");
}
