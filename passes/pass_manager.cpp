#include "passes/pass_manager.h"

#include <cstdio>
#include <fstream>

#include "ir/printer.h"
#include "ir/verifier.h"

namespace gradc::passes {

Status PassManager::dump(const ir::Graph& graph, size_t index, std::string_view stage) const {
  if (!options_.dumpDir) return {};
  std::error_code ec;
  std::filesystem::create_directories(*options_.dumpDir, ec);
  if (ec) return Error{"cannot create dump folder '" + options_.dumpDir->string() + "': " + ec.message()};
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02zu-", index);
  std::filesystem::path file = *options_.dumpDir / (prefix + std::string(stage) + ".gir");
  std::ofstream out(file);
  out << ir::printGraph(graph);
  if (!out) return Error{"cannot write '" + file.string() + "'"};
  return {};
}

Expected<bool> PassManager::run(ir::Graph& graph) {
  if (Status s = dump(graph, 0, "input"); !s) return Error{s.message()};
  bool anyChange = false;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& pass = *passes_[i];
    Expected<bool> changed = pass.run(graph);
    if (!changed) return Error{"pass '" + std::string(pass.name()) + "' failed: " + changed.error().message};
    if (*changed) {
      anyChange = true;
      if (options_.verifyAfterChange)
        if (Status s = ir::verify(graph); !s)
          return Error{"verifier failed after pass '" + std::string(pass.name()) + "': " + s.message()};
    }
    if (options_.printAfterAll)
      *options_.printAfterAll << "// ----- IR after " << pass.name() << (*changed ? "" : " (unchanged)") << " -----\n"
                              << ir::printGraph(graph);
    if (Status s = dump(graph, i + 1, pass.name()); !s) return Error{s.message()};
  }
  return anyChange;
}

}  // namespace gradc::passes
