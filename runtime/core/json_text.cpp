#include "runtime/core/json_text.h"

namespace gradc::runtime {

int jsonNestingDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string jsonNestingError(std::string_view text) {
  if (jsonNestingDepth(text) <= kMaxJsonNesting) return {};
  return "JSON nested more than " + std::to_string(kMaxJsonNesting) + " levels deep (gradc writes a few)";
}

nlohmann::json parseJsonBounded(std::string_view text) {
  if (jsonNestingDepth(text) > kMaxJsonNesting) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace gradc::runtime
