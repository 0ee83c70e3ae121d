// Names in messages; see suggest.h.
#include "frontend/suggest.h"

#include <algorithm>
#include <cstdint>

namespace gradc::frontend {

size_t editDistance(std::string_view a, std::string_view b) {
  // Three rolling rows: the transposition rule looks two rows back.
  std::vector<size_t> twoBack(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        cur[j] = std::min(cur[j], twoBack[j - 2] + 1);
    }
    std::swap(twoBack, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> closeMatches(std::string_view word, const std::vector<std::string>& candidates) {
  // Names longer than this are not worth comparing (and keep the cost of a hint bounded).
  constexpr size_t kMaxCompared = 64;
  std::vector<std::string> best;
  if (word.size() > kMaxCompared) return best;
  size_t bestDistance = SIZE_MAX;
  for (const std::string& c : candidates) {
    if (c.size() > kMaxCompared || c == word) continue;
    size_t d = editDistance(word, c);
    size_t allowed = std::max<size_t>(1, std::max(word.size(), c.size()) / 3);
    // Replacing every letter is no match ('d' is not a misspelling of 'a').
    if (d > allowed || d >= std::max(word.size(), c.size())) continue;
    if (d < bestDistance) {
      bestDistance = d;
      best.clear();
    }
    if (d == bestDistance && std::find(best.begin(), best.end(), c) == best.end()) best.push_back(c);
  }
  return best;
}

std::string quotedList(const std::vector<std::string>& items) {
  // Long lists are cut: a hint should stay readable.
  constexpr size_t kMaxShown = 20;
  size_t shown = std::min(items.size(), kMaxShown);
  std::string out;
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += i + 1 == items.size() ? " and " : ", ";
    out += "'" + items[i] + "'";
  }
  if (shown < items.size()) out += " and " + std::to_string(items.size() - shown) + " more";
  return out;
}

std::string clip(std::string_view name) {
  constexpr size_t kMax = 64;
  if (name.size() <= kMax) return std::string(name);
  return std::string(name.substr(0, kMax)) + "...";
}

std::string didYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  std::vector<std::string> matches = closeMatches(word, candidates);
  if (matches.empty()) return {};
  std::string out = "did you mean ";
  for (size_t i = 0; i < matches.size(); ++i) {
    if (i) out += i + 1 == matches.size() ? " or " : ", ";
    out += "'" + matches[i] + "'";
  }
  return out + "?";
}

}  // namespace gradc::frontend
