// gradc compile SPEC [--set k=v]... [--emit ir|dot|summary|plan] [-o FILE]
//
// ir, dot and summary describe the forward graph. plan compiles a training step (autodiff,
// AdamW with its defaults, dce, schedule) and writes its memory plan as JSON (tools/plan_json.h,
// docs/memory.md).
#include <iostream>
#include <memory>

#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/memory_plan.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "tools/commands.h"
#include "tools/output.h"
#include "tools/pipeline_options.h"
#include "tools/plan_json.h"
#include "tools/spec_loading.h"

namespace gradc::tools {

namespace {
struct CompileOptions {
  std::string spec;
  std::vector<std::string> sets;
  PipelineOptions pipeline;
};

// The training step's plan: the same pipeline `gradc train` runs with its default optimizer.
int emitPlan(ir::Graph& graph, const CompileOptions& o) {
  passes::PassManager pm(o.pipeline.passManagerOptions());
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>().add<passes::DeadCodeElimination>().add<passes::Schedule>();
  if (Expected<bool> ran = pm.run(graph); !ran) {
    std::cerr << "gradc: error: " << ran.error().message << "\n";
    return kExitUserError;
  }
  passes::MemoryPlan plan = passes::planMemory(graph);
  if (Status s = writeOutput(o.pipeline.output, planToJson(plan)); !s) {
    std::cerr << "gradc: error: " << s.message() << "\n";
    return kExitInternal;
  }
  return kExitOk;
}

int runCompile(const CompileOptions& o) {
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, o.sets, exitCode);
  if (!graph) return exitCode;
  if (o.pipeline.emit == "plan") return emitPlan(*graph, o);

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
  // compile alone also emits the training step's memory plan: widen the shared --emit check.
  CLI::Option* emit = cmd.get_option("--emit");
  emit->get_validator()->active(false).description("");
  emit->check(CLI::IsMember({"ir", "dot", "summary", "plan"}));
  emit->description("What to print: ir (IR text), dot (Graphviz), summary (sizes and FLOPs) of the forward graph, "
                    "or plan (the training step's memory plan as JSON, for gradc inspect)");
  return [o] { return runCompile(*o); };
}

}  // namespace gradc::tools
