// gradc compile SPEC [--set k=v]... [--emit ir|dot|summary] [-o FILE]
#include <iostream>
#include <memory>

#include "frontend/spec.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "tools/commands.h"
#include "tools/output.h"
#include "tools/pipeline_options.h"

namespace gradc::tools {

namespace {
struct CompileOptions {
  std::string spec;
  std::vector<std::string> sets;
  PipelineOptions pipeline;
};

int runCompile(const CompileOptions& o) {
  frontend::SpecOptions specOptions;
  for (const std::string& kv : o.sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "gradc: error: --set expects NAME=EXPR, got '" << kv << "'\n";
      return kExitUserError;
    }
    specOptions.overrides.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  Expected<std::string> source = readInput(o.spec, static_cast<size_t>(specOptions.maxSourceBytes));
  if (!source) {
    std::cerr << "gradc: error: " << source.error().message << "\n";
    return kExitUserError;
  }
  frontend::SpecResult result = frontend::compileSpec(*source, o.spec, specOptions);
  for (const frontend::Diagnostic& d : result.diagnostics) std::cerr << frontend::formatDiagnostic(d, *source);
  if (!result.ok()) return kExitUserError;

  // The compile pipeline. Later stages (autodiff, optimizer, data_parallel, remat, schedule,
  // memory_plan) join here as they land.
  passes::PassManager pm(o.pipeline.passManagerOptions());
  pm.add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(*result.graph);
  if (!ran) {
    std::cerr << "gradc: error: " << ran.error().message << "\n";
    return kExitInternal;
  }
  return emitGraph(*result.graph, o.pipeline);
}
}  // namespace

Runner addCompileCommand(CLI::App& cmd) {
  auto o = std::make_shared<CompileOptions>();
  cmd.add_option("spec", o->spec, "The YAML model spec (e.g. models/gpt-mini.yaml)")->required();
  cmd.add_option("--set", o->sets, "Override a dim (or seed): --set batch=64 (repeatable; the value may be an expression)");
  o->pipeline.addTo(cmd, "summary");
  return [o] { return runCompile(*o); };
}

}  // namespace gradc::tools
