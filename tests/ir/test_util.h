// Helpers shared by IR and pass tests.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"

namespace gradc::testing {

// Parses IR text that the test expects to be valid; fails the test with the parser's message
// otherwise.
inline ir::Graph parseOrFail(const std::string& text) {
  Expected<ir::Graph> g = ir::parseGraph(text, "test.gir");
  if (!g) FAIL(g.error().message);
  return std::move(g).value();
}

// Removes the two-space indentation the printer uses, so expectations can be written flush.
inline std::string dedent(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t first = line.find_first_not_of(' ');
    out += (first == std::string::npos ? "" : line.substr(first)) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace gradc::testing
