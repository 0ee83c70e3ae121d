// remat_ilp_export: a training step's graph and gradc's recompute plans, as JSON, for the
// exact reference of bench/remat_ilp.py (Checkmate's MILP, solved by CBC).
//
//   remat_ilp_export MODEL.yaml [--set name=value]... [--budgets F1,F2,...]
//
// The step is the one gradc plans: autodiff and dce over the forward, gradients as graph
// outputs (no optimizer, so both sides keep every gradient to the end), one micro-batch, the
// loss unfused. Printed (stdout):
//   nodes: in the schedule pass's order of the step without recompute, each with its FLOPs (the cost model gradc's remat uses), the
//     bytes of the storage it allocates, its kernel workspace (held while it runs), the nodes
//     whose storage it reads (deps) and whether its storage is a graph output. View nodes
//     (reshape that aliases, transpose, select, ...) allocate nothing: they are folded into
//     the node owning the storage they alias, so deps name storage owners.
//   persistent_bytes: parameters and inputs.
//   gradc: for each budget, gradc's choice under --remat auto: peak, recompute FLOPs and plan.
//     A budget is smallest + F x (no-remat peak - smallest) for each fraction F, where
//     smallest is gradc's smallest feasible budget; also sqrt's plan without a budget.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_spec.h"
#include "frontend/spec.h"
#include "passes/budget.h"
#include "passes/liveness.h"
#include "passes/micro_batch.h"
#include "passes/id_index.h"
#include "passes/remat.h"
#include "passes/schedule.h"

using namespace gradc;

namespace {

passes::TrainingPlanOptions stepOptions(passes::RematStrategy strategy, std::optional<std::int64_t> budget) {
  passes::TrainingPlanOptions o;
  o.optimizer = std::nullopt;
  o.microBatches = 1;
  o.lossChunks.mode = passes::LossChunking::Mode::Off;
  o.remat = passes::RematOptions{strategy, budget};
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: remat_ilp_export MODEL.yaml [--set name=value]... [--budgets F1,F2,...]\n");
    return 2;
  }
  frontend::SpecOptions specOptions;
  std::vector<double> fractions{0.0, 0.25, 0.5, 0.75};
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--set" && i + 1 < argc) {
      std::optional<std::pair<std::string, std::string>> set = bench::splitOverride(argv[++i]);
      if (!set) return 2;
      specOptions.overrides.push_back(std::move(*set));
    } else if (arg == "--budgets" && i + 1 < argc) {
      fractions.clear();
      std::stringstream list(argv[++i]);
      for (std::string f; std::getline(list, f, ',');) fractions.push_back(std::atof(f.c_str()));
    } else {
      std::fprintf(stderr, "remat_ilp_export: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  std::optional<frontend::SpecResult> spec = bench::compileBenchSpec("remat_ilp_export", argv[1], specOptions);
  if (!spec) return 1;
  const ir::Graph& forward = *spec->graph;
  Expected<passes::RematChoice> joint = passes::chooseTrainingPlan(forward, stepOptions(passes::RematStrategy::None, {}));
  if (!joint) {
    std::fprintf(stderr, "remat_ilp_export: %s\n", joint.error().message.c_str());
    return 1;
  }
  const ir::Graph& g = joint->graph;
  const passes::StorageModel storage = passes::analyzeStorage(g);

  // ILP nodes: the nodes that are not views, in the schedule pass's order of the step without
  // recompute (a topological order; Checkmate takes one as its stages, and the scheduled one
  // is the better start: in program order the MILP cannot reach budgets gradc's schedule fits).
  const passes::ScheduledLiveness scheduled = passes::scheduleAndAnalyze(g, storage);
  passes::IdIndex<ir::Node> ilpIndex(g.nodeIdBound());  // graph node -> ILP node
  std::vector<const ir::Node*> kept;
  for (const ir::Node* n : scheduled.order) {
    if (n->op().view) continue;
    ilpIndex.insert(n, static_cast<int>(kept.size()));
    kept.push_back(n);
  }
  std::vector<char> isOutput(kept.size(), 0);
  for (const ir::GraphOutput& out : g.outputs()) {
    const ir::Value* owner = storage.owner(out.value);
    if (owner->kind() == ir::ValueKind::Result) isOutput[static_cast<size_t>(ilpIndex.get(owner->producer()))] = 1;
  }

  nlohmann::json out;
  out["model"] = g.name();
  out["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < kept.size(); ++i) {
    const ir::Node& n = *kept[i];
    std::int64_t bytes = 0;
    for (size_t r = 0; r < n.numResults(); ++r)
      if (!storage.isView(n.result(r))) bytes += n.result(r)->type().bytes();
    std::vector<int> deps;
    for (const ir::Value* v : n.operands()) {
      const ir::Value* owner = storage.owner(v);
      if (owner->kind() != ir::ValueKind::Result) continue;
      const int d = ilpIndex.get(owner->producer());
      if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
    }
    out["nodes"].push_back({{"op", n.opName()},
                            {"phase", ir::phaseName(n.phase())},
                            {"spec", n.specName()},
                            {"flops", n.flops()},
                            {"bytes", bytes},
                            {"workspace", storage.workspaceBytes(&n)},
                            {"output", isOutput[i] != 0},
                            {"deps", deps}});
  }
  const passes::Liveness& none = scheduled.liveness;
  out["persistent_bytes"] = none.persistentBytes;
  out["none_peak"] = none.peakBytes;
  out["forward_flops"] = joint->report.forwardFlops;

  // gradc's side.
  Expected<passes::RematChoice> floor =
      passes::chooseTrainingPlan(forward, stepOptions(passes::RematStrategy::Auto, none.persistentBytes / 2));
  const std::int64_t smallest = floor ? -1 : passes::smallestFeasibleBudget(floor.error().message).value_or(-1);
  out["smallest_feasible"] = smallest;
  auto plan = [&](passes::RematStrategy s, std::optional<std::int64_t> budget) {
    Expected<passes::RematChoice> c = passes::chooseTrainingPlan(forward, stepOptions(s, budget));
    nlohmann::json j{{"budget", budget.value_or(-1)}, {"fits", c.ok()}};
    if (c) {
      j["peak"] = c->report.predictedPeakBytes;
      j["recompute_flops"] = c->report.recomputeFlops;
      j["plan"] = c->report.plan;
    }
    return j;
  };
  out["sqrt"] = plan(passes::RematStrategy::Sqrt, std::nullopt);
  out["gradc"] = nlohmann::json::array();
  for (double f : fractions)
    out["gradc"].push_back(plan(passes::RematStrategy::Auto,
                                smallest + static_cast<std::int64_t>(f * static_cast<double>(none.peakBytes - smallest))));
  std::fputs((out.dump(1) + "\n").c_str(), stdout);
  return 0;
}
