// Fuzzes the YAML spec frontend. Any input must produce either a graph or diagnostics: no
// crash, no sanitizer report, no hang, no unbounded allocation. For inputs that compile, the
// IR text must also round-trip exactly through the parser (a second oracle for free).
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string_view>

#include "frontend/spec.h"
#include "ir/parser.h"
#include "ir/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gradc::frontend::SpecOptions options;
  options.maxGraphNodes = 200'000;  // keep single executions fast; the bound itself is what is tested
  gradc::frontend::SpecResult result = gradc::frontend::compileSpec(text, "fuzz.yaml", options);
  for (const auto& d : result.diagnostics) (void)gradc::frontend::formatDiagnostic(d, text);
  if (!result.ok()) return 0;
  std::string printed = gradc::ir::printGraph(*result.graph);
  gradc::Expected<gradc::ir::Graph> reparsed = gradc::ir::parseGraph(printed, "printed.gir");
  if (!reparsed.ok() || gradc::ir::printGraph(*reparsed) != printed) {
    std::fprintf(stderr, "round trip failed:\n%s\n", reparsed.ok() ? "(text differs)" : reparsed.error().message.c_str());
    std::abort();
  }
  return 0;
}
