// gradc opt FILE|- [--passes a,b] [--emit ir|dot|summary] [-o FILE]
#include <iostream>
#include <memory>

#include "ir/parser.h"
#include "passes/pass_manager.h"
#include "passes/registry.h"
#include "tools/commands.h"
#include "tools/output.h"
#include "tools/pipeline_options.h"

namespace gradc::tools {

namespace {
struct OptOptions {
  std::string input;
  std::vector<std::string> passes;
  PipelineOptions pipeline;
};

int runOpt(const OptOptions& o) {
  passes::PassManager pm(o.pipeline.passManagerOptions());
  for (const std::string& name : o.passes) {
    std::unique_ptr<passes::Pass> pass = passes::createPass(name);
    if (!pass) {
      std::string known;
      for (std::string_view n : passes::passNames()) known += (known.empty() ? "" : ", ") + std::string(n);
      std::cerr << "gradc: error: unknown pass '" << name << "' (known: " << known << ")\n";
      return kExitUserError;
    }
    pm.add(std::move(pass));
  }
  Expected<std::string> text = readInput(o.input, size_t{1} << 30);
  if (!text) {
    std::cerr << "gradc: error: " << text.error().message << "\n";
    return kExitUserError;
  }
  Expected<ir::Graph> graph = ir::parseGraph(*text, o.input == "-" ? "<stdin>" : o.input);
  if (!graph) {
    std::cerr << graph.error().message << "\n";
    return kExitUserError;
  }
  // A pass that rejects the given IR (autodiff without a loss, ...) is a mistake in the input.
  Expected<bool> ran = pm.run(*graph);
  if (!ran) {
    std::cerr << "gradc: error: " << ran.error().message << "\n";
    return kExitUserError;
  }
  return emitGraph(*graph, o.pipeline);
}
}  // namespace

Runner addOptCommand(CLI::App& cmd) {
  auto o = std::make_shared<OptOptions>();
  cmd.add_option("input", o->input, "IR text file, or - for stdin")->required();
  std::string known;
  for (std::string_view n : passes::passNames()) known += (known.empty() ? "" : ", ") + std::string(n);
  cmd.add_option("--passes", o->passes, "Passes to run, in order, comma-separated (" + known + ")")->delimiter(',');
  o->pipeline.addTo(cmd, "ir");
  return [o] { return runOpt(*o); };
}

}  // namespace gradc::tools
