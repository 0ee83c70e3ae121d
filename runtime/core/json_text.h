#pragma once
// JSON read from files gradc did not necessarily write (manifests, plans, checkpoint state),
// with its nesting bounded before it is parsed. nlohmann's parser is iterative, but copying,
// comparing and serialising a value recurse once per level: a damaged or hostile file nested
// 100,000 deep would overflow the stack there. Every file gradc writes nests a few levels.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace gradc::runtime {

inline constexpr int kMaxJsonNesting = 64;

// The deepest nesting of arrays and objects in `text` (strings and escapes skipped), without
// recursion; stops counting once past `limit`.
int jsonNestingDepth(std::string_view text, int limit = kMaxJsonNesting);

// "" when `text` nests at most kMaxJsonNesting levels, else why it is refused.
std::string jsonNestingError(std::string_view text);

// `text` parsed, or a discarded value (is_discarded()) when it is not valid JSON or nests
// deeper than kMaxJsonNesting levels: callers treat both as a damaged file.
nlohmann::json parseJsonBounded(std::string_view text);

}  // namespace gradc::runtime
