// gradc compile SPEC [--set k=v]... [--emit ir|dot|summary] [-o FILE]
#include <iostream>
#include <memory>

#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "tools/commands.h"
#include "tools/spec_loading.h"
#include "tools/pipeline_options.h"

namespace gradc::tools {

namespace {
struct CompileOptions {
  std::string spec;
  std::vector<std::string> sets;
  PipelineOptions pipeline;
};

int runCompile(const CompileOptions& o) {
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, o.sets, exitCode);
  if (!graph) return exitCode;

  // The compile pipeline. Later stages (autodiff, optimizer, data_parallel, remat, schedule,
  // memory_plan) join here as they land.
  passes::PassManager pm(o.pipeline.passManagerOptions());
  pm.add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(*graph);
  if (!ran) {
    std::cerr << "gradc: error: " << ran.error().message << "\n";
    return kExitInternal;
  }
  return emitGraph(*graph, o.pipeline);
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
