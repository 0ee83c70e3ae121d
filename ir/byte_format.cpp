#include "ir/byte_format.h"

#include <array>
#include <cstdio>
#include <string_view>

namespace gradc::ir {

std::string formatBytes(std::int64_t bytes) {
  static constexpr std::array<std::string_view, 5> names = {"B", "KiB", "MiB", "GiB", "TiB"};
  const bool negative = bytes < 0;
  long double v = negative ? -static_cast<long double>(bytes) : static_cast<long double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0L && unit + 1 < names.size()) {
    v /= 1024.0L;
    ++unit;
  }
  char buf[64];
  if (unit == 0)
    std::snprintf(buf, sizeof buf, "%s%lld B", negative ? "-" : "", static_cast<long long>(negative ? -bytes : bytes));
  else
    std::snprintf(buf, sizeof buf, "%s%.1Lf %s", negative ? "-" : "", v, std::string(names[unit]).c_str());
  return buf;
}

std::string withThousands(std::int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

std::string formatBytesExact(std::int64_t bytes) {
  if (bytes > -1024 && bytes < 1024) return formatBytes(bytes);
  return formatBytes(bytes) + " (" + withThousands(bytes) + " bytes)";
}

}  // namespace gradc::ir
