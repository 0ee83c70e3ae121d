// Renders a Diagnostic the way compilers do:
//
//   models/gpt.yaml:12:10: error: unknown op 'lienar'
//      12 |   - {op: lienar, out: 10}
//         |          ^
//     hint: did you mean 'linear'?
#include <algorithm>
#include <cstdio>

#include "frontend/spec.h"

namespace gradc::frontend {

namespace {

// The 1-based line `line` of the text, without its line break; nullopt when there is none.
std::optional<std::string_view> sourceLine(std::string_view text, int line) {
  if (line <= 0) return std::nullopt;
  size_t start = 0;
  for (int i = 1; i < line; ++i) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) return std::nullopt;
    start = nl + 1;
  }
  if (start > text.size()) return std::nullopt;
  size_t end = text.find('\n', start);
  std::string_view s = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

// Control characters of the input (an ESC sequence in a spec) are shown as \xNN, never sent
// to the terminal raw; tabs stay (the caret line keeps them).
bool isControl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

std::string printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (isControl(c)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string formatDiagnostic(const Diagnostic& diag, std::string_view sourceText) {
  std::string out = diag.file.empty() ? std::string("<spec>") : printable(diag.file);
  if (diag.line > 0) {
    out += ":" + std::to_string(diag.line);
    if (diag.column > 0) out += ":" + std::to_string(diag.column);
  }
  out += diag.severity == Severity::Error ? ": error: " : ": warning: ";
  out += printable(diag.message);
  out += "\n";

  if (std::optional<std::string_view> line = sourceLine(sourceText, diag.line)) {
    // Very long lines (minified input) are shown only up to the caret's neighbourhood.
    constexpr size_t kMaxShown = 200;
    std::string_view shown = line->substr(0, std::max<size_t>(kMaxShown, static_cast<size_t>(diag.column) + 20));
    char number[32];
    std::snprintf(number, sizeof number, "%5d | ", diag.line);
    out += number;
    out += printable(shown);
    out += "\n";
    if (diag.column > 0) {
      out += "      | ";
      // Keep tabs, and the width of escaped characters, so that the caret lines up under the
      // same character.
      size_t col = std::min(static_cast<size_t>(diag.column - 1), shown.size());
      for (size_t i = 0; i < col; ++i)
        out += shown[i] == '\t' ? "\t" : isControl(static_cast<unsigned char>(shown[i])) ? "    " : " ";
      out += "^\n";
    }
  }
  if (!diag.hint.empty()) out += "  hint: " + printable(diag.hint) + "\n";
  return out;
}

}  // namespace gradc::frontend
