// Runs a pipeline of passes over a graph.
//
// After every pass that reports a change, the verifier runs (unless disabled); a violation
// fails the pipeline with "verifier failed after pass 'NAME': ..." (ErrorKind::Internal), so a
// broken invariant is blamed on the pass that broke it. Optionally prints the IR after each
// pass to a stream (--print-after-all) and writes each stage to a folder (--dump-dir):
// 00-input.gir, 01-dce.gir, ...
//
// A pipeline run on a candidate that may be thrown away (the training-plan search builds many)
// records its stages instead (PassManagerOptions::record); the PassManager that shows the
// chosen one's (show) prints and dumps them as its own, numbered in sequence with the stages it
// runs itself afterwards.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "passes/pass.h"

namespace gradc::passes {

// One stage of a pipeline as --print-after-all and --dump-dir show it: the IR after `pass`.
struct RecordedStage {
  std::string pass;  // "input" for the graph before the first pass
  bool changed = true;
  std::string ir;    // ir::printGraph of the graph after it
};

struct PassManagerOptions {
  bool verifyAfterChange = true;
  std::ostream* printAfterAll = nullptr;  // nullptr: off
  std::optional<std::filesystem::path> dumpDir;
  // When set, every stage (the input first) is appended here instead of being printed or dumped.
  std::vector<RecordedStage>* record = nullptr;

  // Whether anything looks at the stages (so a pipeline that may be replaced should record them).
  bool showsStages() const { return printAfterAll != nullptr || dumpDir.has_value(); }
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}

  template <class P, class... Args>
  PassManager& add(Args&&... args) {
    passes_.push_back(std::make_unique<P>(std::forward<Args>(args)...));
    return *this;
  }
  PassManager& add(std::unique_ptr<Pass> pass) {
    passes_.push_back(std::move(pass));
    return *this;
  }

  // Ok(true) when some pass changed the graph. The input is shown as stage 0 unless stages were
  // shown before (show).
  Expected<bool> run(ir::Graph& graph);

  // Shows stages recorded elsewhere as this pipeline's next ones (printed, dumped, numbered).
  Status show(std::span<const RecordedStage> stages);
  // Shows `graph` as the stage after `pass`, made outside a Pass (the plan search's choice).
  Status show(const ir::Graph& graph, std::string_view pass, bool changed = true);

  size_t size() const { return passes_.size(); }

 private:
  Status emit(std::string_view pass, bool changed, std::string ir);

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  size_t nextStage_ = 0;  // the number the next stage is dumped with
};

}  // namespace gradc::passes
