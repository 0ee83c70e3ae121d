// Integer size expressions of the spec language: `4 * d_model`, `(seq + 1) / 2`, `-1`.
//
// Grammar (usual precedence, left-associative):
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := ('-' | '+') unary | primary
//   primary := INTEGER | NAME | '(' expr ')'
// INTEGER is decimal digits, optionally grouped with '_' (40_000); NAME is a defined dim.
// Arithmetic is on int64 and every operation is overflow-checked; '/' is exact integer
// division (a remainder is an error, as is division by zero). Expressions are bounded in
// length and nesting depth, so no input can exhaust the stack.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gradc::frontend {

inline constexpr size_t kMaxExprLength = 1000;
inline constexpr int kMaxExprDepth = 64;

// Named integer sizes, in definition order.
class DimTable {
 public:
  // Defines a dim, or redefines it in place.
  void set(std::string_view name, std::int64_t value);
  std::optional<std::int64_t> find(std::string_view name) const;
  std::vector<std::string> names() const;
  const std::vector<std::pair<std::string, std::int64_t>>& entries() const { return entries_; }

 private:
  std::vector<std::pair<std::string, std::int64_t>> entries_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in entries_
};

struct ExprError {
  size_t offset = 0;  // byte offset of the offending token in the expression text
  std::string message;
  std::string hint;
  std::string undefinedName;  // set when the error is an unknown name (callers may refine the hint)
};

struct ExprResult {
  std::optional<std::int64_t> value;  // set on success
  ExprError error;                    // meaningful when value is empty
  bool ok() const { return value.has_value(); }
};

ExprResult evalDimExpr(std::string_view text, const DimTable& dims);

// True for [A-Za-z_][A-Za-z0-9_]*: the names dims (and spec values) may have.
bool isIdentifier(std::string_view name);

}  // namespace gradc::frontend
