// Fuzzes the IR text parser and verifier. Any input must be accepted or rejected with an
// error; an accepted graph must print to text that parses back to the same text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/parser.h"
#include "ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gradc::Expected<gradc::ir::Graph> graph = gradc::ir::parseGraph(text, "fuzz.gir");
  if (!graph.ok()) return 0;
  std::string printed = gradc::ir::printGraph(*graph);
  gradc::Expected<gradc::ir::Graph> again = gradc::ir::parseGraph(printed, "printed.gir");
  if (!again.ok() || gradc::ir::printGraph(*again) != printed) {
    std::fprintf(stderr, "round trip failed: %s\n", again.ok() ? "text differs" : again.error().message.c_str());
    std::abort();
  }
  return 0;
}
