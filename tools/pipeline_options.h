// Options shared by subcommands that run passes and emit a graph: --emit, -o,
// --print-after-all, --dump-dir.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "ir/graph.h"
#include "passes/pass_manager.h"

namespace gradc::tools {

struct PipelineOptions {
  std::string emit = "ir";
  std::string output = "-";
  bool printAfterAll = false;
  std::string dumpDir;

  void addTo(CLI::App& cmd, const std::string& defaultEmit);
  passes::PassManagerOptions passManagerOptions() const;
};

// Renders the graph as --emit asks (ir, dot or summary) and writes it to -o. Returns the exit code.
int emitGraph(const ir::Graph& graph, const PipelineOptions& options);

}  // namespace gradc::tools
