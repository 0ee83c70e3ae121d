// Runs a pipeline of passes over a graph.
//
// After every pass that reports a change, the verifier runs (unless disabled); a violation
// fails the pipeline with "verifier failed after pass 'NAME': ...", so a broken invariant is
// blamed on the pass that broke it. Optionally prints the IR after each pass to a stream
// (--print-after-all) and writes each stage to a folder (--dump-dir): 00-input.gir,
// 01-dce.gir, ... .
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "passes/pass.h"

namespace gradc::passes {

struct PassManagerOptions {
  bool verifyAfterChange = true;
  std::ostream* printAfterAll = nullptr;  // nullptr: off
  std::optional<std::filesystem::path> dumpDir;
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

  // Ok(true) when some pass changed the graph.
  Expected<bool> run(ir::Graph& graph);

  size_t size() const { return passes_.size(); }

 private:
  Status dump(const ir::Graph& graph, size_t index, std::string_view stage) const;

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
};

}  // namespace gradc::passes
