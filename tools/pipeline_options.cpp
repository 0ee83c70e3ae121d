#include "tools/pipeline_options.h"

#include <filesystem>
#include <iostream>

#include "ir/dot_printer.h"
#include "ir/printer.h"
#include "passes/graph_stats.h"
#include "tools/commands.h"
#include "tools/output.h"
#include "tools/summary_report.h"

namespace gradc::tools {

void PipelineOptions::addTo(CLI::App& cmd, const std::string& defaultEmit) {
  emit = defaultEmit;
  cmd.add_option("--emit", emit, "What to print: ir (IR text), dot (Graphviz), summary (sizes and FLOPs)")
      ->check(CLI::IsMember({"ir", "dot", "summary"}))
      ->capture_default_str();
  cmd.add_option("-o,--output", output, "Write to FILE instead of stdout (atomically)")->capture_default_str();
  cmd.add_flag("--print-after-all", printAfterAll, "Print the IR to stderr after every pass");
  cmd.add_option("--dump-dir", dumpDir, "Write the IR before and after every pass to DIR/NN-pass.gir")
      ->check(CLI::Validator(
          [](std::string& dir) -> std::string {
            std::error_code ec;
            const auto status = std::filesystem::status(dir, ec);
            if (std::filesystem::exists(status) && !std::filesystem::is_directory(status))
              return "'" + dir + "' exists and is not a folder";
            return "";
          },
          "DIR"));
}

passes::PassManagerOptions PipelineOptions::passManagerOptions() const {
  passes::PassManagerOptions o;
  if (printAfterAll) o.printAfterAll = &std::cerr;
  if (!dumpDir.empty()) o.dumpDir = dumpDir;
  return o;
}

int emitGraph(const ir::Graph& graph, const PipelineOptions& options) {
  std::string text;
  if (options.emit == "ir") text = ir::printGraph(graph);
  else if (options.emit == "dot") text = ir::printDot(graph);
  else text = formatSummary(graph, passes::computeGraphStats(graph));
  if (Status s = writeOutput(options.output, text); !s)
    return reportWriteFailure(s);
  return kExitOk;
}

}  // namespace gradc::tools
