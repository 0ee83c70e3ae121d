#include "passes/pass_manager.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "ir/printer.h"
#include "ir/verifier.h"

namespace gradc::passes {

namespace {

// GRADC_FAIL_AFTER_PASS=NAME: the pass named fails with an internal error after it runs, wherever
// it runs (under the plan search too), so the tests can check what a compiler bug becomes at the
// CLI (exit 1, the pass named). Read once.
const char* injectedFailure() {
  static const char* name = std::getenv("GRADC_FAIL_AFTER_PASS");
  return name;
}

}  // namespace

Status PassManager::emit(std::string_view pass, bool changed, std::string ir) {
  const size_t index = nextStage_++;
  if (options_.record) {
    options_.record->push_back(RecordedStage{std::string(pass), changed, std::move(ir)});
    return {};
  }
  // The input is dumped, not printed: --print-after-all shows what each pass made of it.
  if (options_.printAfterAll && index > 0)
    *options_.printAfterAll << "// ----- IR after " << pass << (changed ? "" : " (unchanged)") << " -----\n" << ir;
  if (!options_.dumpDir) return {};
  std::error_code ec;
  std::filesystem::create_directories(*options_.dumpDir, ec);
  if (ec) return Error{"cannot create dump folder '" + options_.dumpDir->string() + "': " + ec.message()};
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02zu-", index);
  std::filesystem::path file = *options_.dumpDir / (prefix + std::string(pass) + ".gir");
  std::ofstream out(file);
  out << ir;
  if (!out) return Error{"cannot write '" + file.string() + "'"};
  return {};
}

Status PassManager::show(std::span<const RecordedStage> stages) {
  for (const RecordedStage& s : stages)
    if (Status st = emit(s.pass, s.changed, s.ir); !st) return st;
  return {};
}

Status PassManager::show(const ir::Graph& graph, std::string_view pass, bool changed) {
  if (!options_.showsStages() && !options_.record) {
    ++nextStage_;
    return {};
  }
  return emit(pass, changed, ir::printGraph(graph));
}

Expected<bool> PassManager::run(ir::Graph& graph) {
  const bool stages = options_.showsStages() || options_.record;
  if (nextStage_ == 0 && stages)
    if (Status s = emit("input", true, ir::printGraph(graph)); !s) return s.error();
  if (nextStage_ == 0) nextStage_ = 1;
  bool anyChange = false;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& pass = *passes_[i];
    Expected<bool> changed = pass.run(graph);
    if (const char* failing = injectedFailure(); failing && pass.name() == failing)
      changed = internalError(pass.name(), "failure injected by GRADC_FAIL_AFTER_PASS");
    if (!changed) return changed.error().withContext("pass '" + std::string(pass.name()) + "' failed: ");
    if (*changed) {
      anyChange = true;
      if (options_.verifyAfterChange)
        if (Status s = ir::verify(graph); !s)
          return Error{"verifier failed after pass '" + std::string(pass.name()) + "': " + s.message(),
                       ErrorKind::Internal};
    }
    if (stages) {
      if (Status s = emit(pass.name(), *changed, ir::printGraph(graph)); !s) return s.error();
    } else {
      ++nextStage_;
    }
  }
  return anyChange;
}

}  // namespace gradc::passes
