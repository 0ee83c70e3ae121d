// gradc grad SPEC --weights W.safetensors --inputs I.safetensors -o G.safetensors
// The loss and every parameter gradient for given weights and inputs, so that anyone can check
// gradc against another framework. Gradients are saved under the parameter names; the loss is
// in the file's metadata ("loss") and printed.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <tuple>

#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "runtime/exec/executor.h"
#include "runtime/io/safetensors.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/spec_loading.h"

namespace gradc::tools {

namespace {
struct GradOptions {
  std::string spec;
  std::vector<std::string> sets;
  std::string weights;
  std::string inputs;
  std::string output;
  std::optional<std::uint64_t> seed;
  std::int64_t step = 1;
};

int runGrad(const GradOptions& o) {
  int exitCode = kExitOk;
  std::optional<ir::Graph> graph = loadSpec(o.spec, o.sets, exitCode);
  if (!graph) return exitCode;
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::DeadCodeElimination>();
  if (Expected<bool> r = pm.run(*graph); !r) {
    std::cerr << "gradc: error: " << r.error().message << "\n";
    return kExitUserError;
  }
  Expected<runtime::SafetensorsFile> weights = runtime::loadSafetensors(o.weights);
  if (!weights) {
    std::cerr << "gradc: error: " << weights.error().message << "\n";
    return kExitUserError;
  }
  Expected<runtime::SafetensorsFile> inputs = runtime::loadSafetensors(o.inputs);
  if (!inputs) {
    std::cerr << "gradc: error: " << inputs.error().message << "\n";
    return kExitUserError;
  }
  // As load_state_dict(strict=True): a tensor the model does not have is a mistake (a renamed
  // layer, another model's file), not something to ignore.
  std::set<std::string> params, inputNames;
  for (const auto& p : graph->params()) params.insert(p->name());
  for (const auto& in : graph->inputs()) inputNames.insert(in->name());
  for (const auto& [what, file, names] : {std::tuple{"--weights", &*weights, &params}, std::tuple{"--inputs", &*inputs, &inputNames}})
    for (const auto& [name, t] : file->tensors)
      if (!names->count(name)) {
        std::cerr << "gradc: error: " << what << ": '" << name << "' is not " << (names == &params ? "a parameter" : "an input")
                  << " of this model (it has " << names->size() << ")\n";
        return kExitUserError;
      }
  Expected<runtime::Executor> exec = runtime::Executor::create(*graph);
  if (!exec) {
    std::cerr << "gradc: error: " << exec.error().message << "\n";
    return kExitInternal;
  }
  std::uint64_t seed = o.seed ? *o.seed : static_cast<std::uint64_t>(ir::getInt(graph->attrs(), "seed").value_or(0));
  Expected<runtime::TensorMap> out = exec->run(inputs->tensors, weights->tensors, runtime::RunContext{seed, o.step});
  if (!out) {
    std::cerr << "gradc: error: " << out.error().message << "\n";
    return kExitUserError;
  }
  runtime::TensorMap grads;
  for (const auto& [name, t] : *out)
    if (name.rfind("grad.", 0) == 0) grads.emplace(name.substr(5), t);
  // The shortest text that reads back as the same double: every digit of an f64 loss.
  const std::string loss = fmt::format("{}", out->at("loss").item<double>());
  if (Status s = runtime::saveSafetensors(o.output, grads, {{"loss", loss}, {"format", "pt"}}); !s) {
    std::cerr << "gradc: error: " << s.message() << "\n";
    return kExitInternal;
  }
  std::cout << "loss " << loss << "\n";
  return kExitOk;
}
}  // namespace

Runner addGradCommand(CLI::App& cmd) {
  auto o = std::make_shared<GradOptions>();
  cmd.add_option("spec", o->spec, "The YAML model spec")->required();
  cmd.add_option("--set", o->sets, "Override a dim: --set batch=4 (repeatable)");
  cmd.add_option("--weights", o->weights, "Parameters (safetensors, spec names)")->required();
  cmd.add_option("--inputs", o->inputs, "Graph inputs (safetensors, e.g. tokens and targets)")->required();
  cmd.add_option("-o,--output", o->output, "Where to write the gradients (safetensors)")->required();
  cmd.add_option("--seed", o->seed, "Seed keying dropout masks (default: the spec's seed)")->check(nonNegativeInteger());
  cmd.add_option("--step", o->step, "Step number keying dropout masks")->check(positiveInteger())->capture_default_str();
  return [o] { return runGrad(*o); };
}

}  // namespace gradc::tools
