// Real-valued attribute expressions of the spec language: `1 / sqrt(d_model / heads)`,
// `0.5 * 1e-3`, `1 - 0.9`.
//
// Grammar (usual precedence, left-associative):
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := ('-' | '+') unary | primary
//   primary := NUMBER | NAME | FUNC '(' expr ')' | '(' expr ')'
//   FUNC    := sqrt | exp | log
// NUMBER is a decimal number with an optional fraction and exponent (3, 0.1, 1e-5); NAME is a
// defined dim, read as its integer value. Arithmetic is on double: '/' is real division. A
// division by zero, the square root or log of a value out of range, and any non-finite
// intermediate are errors at the offending token, with the operands' values. Bounded in length
// and nesting like integer expressions (dim_expr.h).
#pragma once

#include <optional>
#include <string_view>

#include "frontend/dim_expr.h"

namespace gradc::frontend {

struct FloatExprResult {
  std::optional<double> value;  // set on success
  ExprError error;              // meaningful when value is empty
  bool ok() const { return value.has_value(); }
};

FloatExprResult evalFloatExpr(std::string_view text, const DimTable& dims);

}  // namespace gradc::frontend
