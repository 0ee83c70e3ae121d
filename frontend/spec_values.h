// Typed reading of YAML values in a spec: integer expressions, sizes, floats, booleans, names,
// and the keys of a mapping. Each reader reports a positioned error (the exact token inside an
// expression) and returns nullopt (or false) when the value does not fit.
//
// `what` names the value in messages, e.g. "attribute 'out' of linear" or "dim 'd_model'".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/diag_sink.h"
#include "frontend/dim_expr.h"
#include "frontend/yaml_tree.h"

namespace gradc::frontend {

// The scalar's text; an error for lists, mappings and null.
std::optional<std::string_view> readScalar(const YamlNode& node, DiagSink& diags, std::string_view what);

// An integer expression over the dims (any sign).
std::optional<std::int64_t> readInt(const YamlNode& node, const DimTable& dims, DiagSink& diags,
                                    std::string_view what);
// An integer expression that must be positive (a size or a count).
std::optional<std::int64_t> readSize(const YamlNode& node, const DimTable& dims, DiagSink& diags,
                                     std::string_view what);
// A list of integer expressions, at most maxItems long.
std::optional<std::vector<std::int64_t>> readIntList(const YamlNode& node, const DimTable& dims, DiagSink& diags,
                                                     std::string_view what, size_t maxItems);
// A finite real: a decimal number (0.1, 1e-5, 3) or an expression over the dims
// (1 / sqrt(d_model / heads); float_expr.h).
std::optional<double> readFloat(const YamlNode& node, const DimTable& dims, DiagSink& diags, std::string_view what);
// true or false.
std::optional<bool> readBool(const YamlNode& node, DiagSink& diags, std::string_view what);
// A name: [A-Za-z_][A-Za-z0-9_]*.
std::optional<std::string_view> readIdentifier(const YamlNode& node, DiagSink& diags, std::string_view what);

// Parses a number the way readFloat does, without reporting (also used for defaults).
std::optional<double> parseFloat(std::string_view text);

// Reports an integer-expression error at its token inside the scalar `node`.
void reportExprError(const YamlNode& node, const ExprError& error, DiagSink& diags);

// Checks that every key of the mapping is a plain scalar in `allowed`; reports the first
// other key at its position ("<owner> has no <noun> 'outt'") with a close match, or
// `fallbackHint` when nothing is close.
bool checkKeys(const YamlNode& map, const std::vector<std::string>& allowed, DiagSink& diags,
               std::string_view owner, std::string_view noun, std::string_view fallbackHint);

}  // namespace gradc::frontend
