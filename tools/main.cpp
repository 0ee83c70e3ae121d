// gradc: compile YAML model specs, inspect and transform IR.
#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "frontend/suggest.h"
#include "runtime/comm/library_logging.h"
#include "runtime/backends/kernel_targets.h"
#include "runtime/io/artifact.h"
#include "runtime/kernels/blas_kernels.h"
#include "tools/commands.h"
#include "tools/failure_guard.h"
#include "tools/flag_checks.h"

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  using namespace gradc::tools;
  gradc::runtime::selectBlasKernels(argv);  // may re-execute once with better BLAS kernels
  gradc::runtime::setLibraryLogging(/*verbose=*/false);  // train --verbose turns them back on
  CLI::App app{"gradc: a graph-compiling training framework that fits training into a memory budget"};
  app.require_subcommand(1);
  useErrorFormat(app, "gradc");
  app.set_version_flag("--version", std::string("gradc ") + gradc::runtime::kGradcVersion);
  std::vector<std::pair<CLI::App*, Runner>> commands;
  CLI::App* compile =
      app.add_subcommand("compile", "Compile a YAML model spec into an artifact (-o DIR); or emit its IR, Graphviz dot, a summary or the memory plan");
  commands.emplace_back(compile, addCompileCommand(*compile));
  CLI::App* opt = app.add_subcommand("opt", "Parse IR text, optionally run passes over it, and print it again");
  commands.emplace_back(opt, addOptCommand(*opt));
  CLI::App* train = app.add_subcommand("train", "Train a spec or a compiled artifact on CPU: loss, progress, checkpoints, metrics");
  commands.emplace_back(train, addTrainCommand(*train));
  CLI::App* grad = app.add_subcommand("grad", "Loss and every parameter gradient for given weights and inputs");
  commands.emplace_back(grad, addGradCommand(*grad));
  CLI::App* eval = app.add_subcommand("eval", "Mean loss of trained weights on a text file (dropout off)");
  commands.emplace_back(eval, addEvalCommand(*eval));
  CLI::App* inspect = app.add_subcommand("inspect", "Where the bytes of a memory plan go: peak, contributors, timeline");
  commands.emplace_back(inspect, addInspectCommand(*inspect));
  CLI::App* plot = app.add_subcommand("plot", "Loss curves of runs' metrics files as one SVG chart");
  commands.emplace_back(plot, addPlotCommand(*plot));
  CLI::App* sample = app.add_subcommand("sample", "Text from a trained language model, streamed as it is generated");
  commands.emplace_back(sample, addSampleCommand(*sample));
  // A word where the command belongs that names none: say so (CLI11 would only ask for one).
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const auto& [sub, run] : commands) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      const std::string hint = gradc::frontend::didYouMean(argv[1], names);
      std::cerr << "gradc: error: unknown command '" << gradc::frontend::clip(argv[1]) << "'"
                << (hint.empty() ? "" : "; " + hint) << " (the commands: " << gradc::frontend::quotedList(names)
                << "; see gradc --help)\n";
      return kExitUserError;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUserError;
  }
  for (auto& [sub, run] : commands)
    if (sub->parsed()) {
      int code = runGuarded("gradc", run);
      // Whatever a command printed must have reached its reader (a full disk, a closed pipe).
      std::cout.flush();
      if (!std::cout && code == kExitOk) {
        std::cerr << "gradc: error: cannot write to standard output\n";
        return kExitInternal;
      }
      return code;
    }
  return kExitUserError;
}
