#include "tools/flag_checks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

namespace gradc::tools {

namespace {

std::string got(const std::string& range, const std::string& text) {
  return "must be " + range + ", got '" + text + "'";
}

// The whole text as a finite number, or nullopt.
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string fmtNumber(double v) { return fmt::format("{}", v); }

}  // namespace

void useErrorFormat(CLI::App& app, const std::string& program) {
  app.failure_message([program](const CLI::App* top, const CLI::Error& e) {
    std::string command = program;
    for (const CLI::App* sub : top->get_subcommands()) command += " " + sub->get_name();
    return program + ": error: " + e.what() + "; see " + command + " --help\n";
  });
}

std::string checkInteger(const std::string& text, std::int64_t lo, std::int64_t hi, const std::string& range) {
  if (text.empty() || text.size() > 20) return got(range, text);
  size_t i = text[0] == '-' || text[0] == '+' ? 1 : 0;
  if (i == text.size()) return got(range, text);
  for (size_t k = i; k < text.size(); ++k)
    if (text[k] < '0' || text[k] > '9') return got(range, text);
  if (text[0] == '-') {
    errno = 0;
    const long long v = std::strtoll(text.c_str(), nullptr, 10);
    if (errno == ERANGE || v < lo || v > hi) return got(range, text);
    return "";
  }
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str() + i, nullptr, 10);
  if (errno == ERANGE || (hi >= 0 && v > static_cast<unsigned long long>(hi)) ||
      static_cast<long double>(v) < static_cast<long double>(lo))
    return got(range, text);
  return "";
}

CLI::Validator positiveInteger() {
  return CLI::Validator(
      [](std::string& s) { return checkInteger(s, 1, std::numeric_limits<std::int64_t>::max(), "a positive integer"); },
      "INT>0");
}

CLI::Validator nonNegativeInteger() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        // Up to 2^64 - 1 (seeds are unsigned): only the sign and the digits are checked here.
        if (!s.empty() && s[0] == '-') return got("a non-negative integer", s);
        if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
          return got("a non-negative integer", s);
        errno = 0;
        std::strtoull(s.c_str(), nullptr, 10);
        return errno == ERANGE ? got("a non-negative integer below 2^64", s) : "";
      },
      "INT>=0");
}

CLI::Validator integerIn(std::int64_t lo, std::int64_t hi) {
  const std::string range = fmt::format("an integer from {} to {}", lo, hi);
  return CLI::Validator([lo, hi, range](std::string& s) { return checkInteger(s, lo, hi, range); },
                        fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator positiveNumber() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::optional<double> v = number(s);
        return v && *v > 0 ? "" : got("a positive number", s);
      },
      "NUMBER>0");
}

CLI::Validator nonNegativeNumber() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::optional<double> v = number(s);
        return v && *v >= 0 ? "" : got("a non-negative number", s);
      },
      "NUMBER>=0");
}

std::string checkOutputPath(const std::string& flag, const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::is_directory(status)) return flag + ": '" + path.string() + "' is a folder; give a file name";
  if (fs::exists(status)) {
    if (::access(path.c_str(), W_OK) != 0) return flag + ": cannot write '" + path.string() + "': " + std::strerror(errno);
    if (!fs::is_regular_file(status)) return {};  // a device or a FIFO is written in place
  }
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec)) return flag + ": the folder '" + folder.string() + "' does not exist";
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return flag + ": cannot write in the folder '" + folder.string() + "': " + std::strerror(errno);
  return {};
}

CLI::Validator numberIn(double lo, double hi, bool closedHigh) {
  const std::string range =
      fmt::format("a number in [{}, {}{}", fmtNumber(lo), fmtNumber(hi), closedHigh ? "]" : ")");
  return CLI::Validator(
      [lo, hi, closedHigh, range](std::string& s) -> std::string {
        std::optional<double> v = number(s);
        return v && *v >= lo && (closedHigh ? *v <= hi : *v < hi) ? "" : got(range, s);
      },
      range.substr(2));
}

}  // namespace gradc::tools
