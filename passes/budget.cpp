#include "passes/budget.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <limits>

namespace gradc::passes {

namespace {

constexpr std::string_view kForms =
    "accepted: a positive integer number of bytes (200000000), or a number with a unit: "
    "B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000), "
    "case-insensitive, e.g. 512MiB, 2GB, 1.5GiB";

struct Unit {
  std::string_view name;  // lowercase
  std::int64_t factor;
};

constexpr std::int64_t kKi = 1024;
constexpr std::int64_t kK = 1000;
constexpr std::array<Unit, 9> kUnits = {{
    {"b", 1},
    {"kib", kKi},
    {"mib", kKi * kKi},
    {"gib", kKi * kKi * kKi},
    {"tib", kKi * kKi * kKi * kKi},
    {"kb", kK},
    {"mb", kK * kK},
    {"gb", kK * kK * kK},
    {"tb", kK * kK * kK * kK},
}};

Error bad(std::string_view text, std::string_view why) {
  return Error{"invalid byte budget '" + std::string(text) + "': " + std::string(why) + "; " + std::string(kForms)};
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

Expected<std::int64_t> parseBytes(std::string_view text) {
  const std::string s = trim(text);
  if (s.empty()) return bad(text, "it is empty");

  // Number: digits, optionally '_' separators (as in the specs), optionally one '.' fraction.
  size_t i = 0;
  std::string intPart, fracPart;
  bool dot = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      (dot ? fracPart : intPart) += c;
    } else if (c == '_' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))) {
      continue;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (s[0] == '-') return bad(text, "a budget must be positive");
  if (intPart.empty() && fracPart.empty()) return bad(text, "it does not start with a number");
  if (dot && fracPart.empty()) return bad(text, "a '.' must be followed by digits");

  std::string unitText = trim(std::string_view(s).substr(i));
  std::int64_t factor = 1;
  if (!unitText.empty()) {
    const std::string u = lower(unitText);
    bool found = false;
    for (const Unit& unit : kUnits)
      if (unit.name == u) {
        factor = unit.factor;
        found = true;
      }
    if (!found) return bad(text, "unknown unit '" + unitText + "'");
  }
  if (dot && factor == 1) return bad(text, "a fraction of a byte is not a budget (add a unit: 1.5GiB)");

  // Exact integer arithmetic: value = (intPart + fracPart / 10^f) * factor.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  auto overflow = [&] { return bad(text, "it is larger than the largest budget gradc handles (2^63 - 1 bytes)"); };
  std::int64_t whole = 0;
  for (char c : intPart) {
    if (whole > (kMax - (c - '0')) / 10) return overflow();
    whole = whole * 10 + (c - '0');
  }
  if (whole > kMax / factor) return overflow();
  std::int64_t bytes = whole * factor;
  if (!fracPart.empty()) {
    // fraction * factor, rounded down; at most 18 digits are significant for int64 factors.
    if (fracPart.size() > 18) fracPart.resize(18);
    std::int64_t num = 0, den = 1;
    for (char c : fracPart) {
      num = num * 10 + (c - '0');
      den *= 10;
    }
    // Exact: num * factor / den in 128-bit arithmetic (num < 10^18, factor < 2^41).
    const __int128 part = static_cast<__int128>(num) * factor / den;
    if (part > static_cast<__int128>(kMax - bytes)) return overflow();
    bytes += static_cast<std::int64_t>(part);
  }
  if (bytes <= 0) return bad(text, "a budget must be at least one byte");
  return bytes;
}

}  // namespace gradc::passes
