// Golden tests: each tests/golden/*.yaml compiles to exactly the IR text in the .gir file next
// to it. After an intended change, regenerate with GRADC_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "frontend/spec.h"
#include "ir/printer.h"

namespace fs = std::filesystem;
using namespace gradc;

namespace {

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("golden IR for tests/golden/*.yaml") {
  fs::path dir = fs::path(GRADC_SOURCE_DIR) / "tests" / "golden";
  std::vector<fs::path> specs;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".yaml") specs.push_back(entry.path());
  std::sort(specs.begin(), specs.end());
  REQUIRE(specs.size() >= 2);

  const char* update = std::getenv("GRADC_UPDATE_GOLDEN");
  bool updating = update && std::string(update) == "1";
  for (const fs::path& spec : specs) {
    CAPTURE(spec.filename().string());
    std::string source = readFile(spec);
    frontend::SpecResult r = frontend::compileSpec(source, spec.filename().string());
    std::string diags;
    for (const auto& d : r.diagnostics) diags += frontend::formatDiagnostic(d, source);
    INFO(diags);
    REQUIRE(r.ok());
    CHECK(r.diagnostics.empty());
    std::string actual = ir::printGraph(*r.graph);
    fs::path golden = fs::path(spec).replace_extension(".gir");
    if (updating) {
      std::ofstream(golden, std::ios::binary) << actual;
      MESSAGE("updated " << golden.filename().string());
      continue;
    }
    REQUIRE_MESSAGE(fs::exists(golden), "missing " << golden.string() << "; run with GRADC_UPDATE_GOLDEN=1");
    CHECK(readFile(golden) == actual);
  }
}
