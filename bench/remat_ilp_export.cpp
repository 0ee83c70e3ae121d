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
//     the node owning the storage they alias, so deps name storage owners. A view op whose
//     result owns storage (a reshape that copies) is a node like any other. A node with
//     several results that own storage (layer norm's output, mean and rstd) is one ILP node per
//     result, which gradc frees separately ("group" names the first; see main()).
//   persistent_bytes: parameters and inputs.
//   gradc: for each budget, gradc's choice under --remat auto: peak, recompute FLOPs and plan,
//     and its sequence: the plan's computations in the schedule pass's order (views left out,
//     as above), each as [ILP node, [positions in the sequence of the computations whose
//     storage it reads]]; a recompute clone names the ILP node it clones. bench/remat_ilp.py
//     --order gradc takes the order of first computation as the MILP's stages and this
//     sequence as a point of the MILP (gradc's plan).
//     A budget is smallest + F x (no-remat peak - smallest) for each fraction F, where
//     smallest is gradc's smallest feasible budget; also sqrt's plan without a budget.
//   checkpoint_sequential: torch.utils.checkpoint.checkpoint_sequential's plan with k segments
//     (bench/segment_points.h) on the same step: its scheduled peak and recompute FLOPs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_spec.h"
#include "bench/ilp_step.h"
#include "bench/segment_points.h"
#include "frontend/spec.h"
#include "passes/budget.h"
#include "passes/id_index.h"
#include "passes/memory/liveness.h"
#include "passes/micro_batch.h"
#include "passes/plan/training_planner.h"
#include "passes/remat.h"
#include "passes/schedule.h"
#include "runtime/backends/kernel_targets.h"

using namespace gradc;

namespace {

// A node the ILP leaves out: a view op none of whose results owns storage (a view op that
// materialises its result, as a reshape of a non-contiguous value does, allocates).
bool foldedView(const ir::Node& n, const passes::StorageModel& storage) {
  if (!n.op().view) return false;
  for (size_t r = 0; r < n.numResults(); ++r)
    if (!storage.isView(n.result(r))) return false;
  return true;
}

// The results of n that own storage: n is one ILP node per such result, in result order. A node
// none of whose results owns storage (and that is no folded view) is one ILP node of 0 bytes (-1).
std::vector<int> ownedResults(const ir::Node& n, const passes::StorageModel& storage) {
  std::vector<int> owned;
  for (size_t r = 0; r < n.numResults(); ++r)
    if (!storage.isView(n.result(r))) owned.push_back(static_cast<int>(r));
  if (owned.empty()) owned.push_back(-1);
  return owned;
}


// gradc's planned step as ILP nodes: `planned` is `base` with the plan's recompute clones (phase
// recompute) and rewired operands; its other nodes are base's, in the same program order.
// When the correspondence cannot be established, `why` says where and the result is empty.
// ilpIndex: a base node's first ILP node.
nlohmann::json planSequence(const ir::Graph& base, const passes::StorageModel& baseStorage,
                            const passes::IdIndex<ir::Node>& ilpIndex, const ir::Graph& planned, std::string& why) {
  const passes::StorageModel storage = passes::analyzeStorage(planned);
  std::vector<const ir::Node*> baseById(base.nodeIdBound(), nullptr);
  for (const auto& n : base.nodes()) baseById[n->id()] = n.get();
  passes::IdIndex<ir::Node> ilpOf(planned.nodeIdBound());      // planned node -> ILP node
  std::vector<const ir::Node*> originalOf(planned.nodeIdBound(), nullptr);  // clone -> planned original
  std::vector<const ir::Node*> forward;
  size_t originals = 0;
  for (const auto& owned : planned.nodes()) {
    const ir::Node* n = owned.get();
    if (n->phase() == ir::Phase::recompute) continue;
    // Both graphs are built from the same forward by the same passes: a node keeps its id.
    const ir::Node* b = n->id() < baseById.size() ? baseById[n->id()] : nullptr;
    if (!b || b->opName() != n->opName() || b->specName() != n->specName()) {
      why = "no node of the step without recompute has the id of " + std::string(n->opName()) + " " + n->specName();
      return {};
    }
    originalOf[n->id()] = n;
    if (ownedResults(*n, storage) != ownedResults(*b, baseStorage)) {
      why = "the storage of " + std::string(n->opName()) + " " + n->specName() + " differs from the step without recompute";
      return {};
    }
    if (const int i = ilpIndex.get(b); i >= 0) ilpOf.insert(n, i);
    if (n->phase() == ir::Phase::fwd) forward.push_back(n);
    ++originals;
  }
  if (originals != base.nodes().size()) {
    why = "the plan's graph does not hold every node of the step without recompute";
    return {};
  }
  // A clone reads what its original reads, with clones' results in place of their originals'.
  auto originalValue = [&](const ir::Value* v) -> const ir::Value* {
    if (v->kind() != ir::ValueKind::Result || v->producer()->phase() != ir::Phase::recompute) return v;
    const ir::Node* o = originalOf[v->producer()->id()];
    return o ? o->result(v->resultIndex()) : nullptr;
  };
  for (const auto& owned : planned.nodes()) {
    const ir::Node* c = owned.get();
    if (c->phase() != ir::Phase::recompute) continue;
    for (const ir::Node* o : forward) {
      if (o->opName() != c->opName() || o->specName() != c->specName() || o->numOperands() != c->numOperands()) continue;
      bool same = true;
      for (size_t k = 0; k < c->numOperands() && same; ++k) same = originalValue(c->operand(k)) == o->operand(k);
      if (!same) continue;
      originalOf[c->id()] = o;
      if (const int i = ilpOf.get(o); i >= 0) ilpOf.insert(c, i);
      break;
    }
    if (!originalOf[c->id()]) {
      why = "no forward node for the clone " + std::string(c->opName()) + " " + c->specName();
      return {};
    }
  }
  const passes::ScheduledLiveness scheduled = passes::scheduleAndAnalyze(planned, storage);
  std::unordered_map<const ir::Value*, int> position;  // storage owner -> its computation in the sequence
  nlohmann::json sequence = nlohmann::json::array();
  for (const ir::Node* n : scheduled.order) {
    if (foldedView(*n, storage)) continue;
    const int first = ilpOf.get(n);
    if (first < 0) {
      why = "no ILP node for " + std::string(n->opName()) + " " + n->specName();
      return {};
    }
    std::vector<int> reads;
    for (const ir::Value* v : n->operands()) {
      const ir::Value* owner = storage.owner(v);
      if (owner->kind() != ir::ValueKind::Result) continue;
      const auto p = position.find(owner);
      if (p == position.end()) {
        why = "a read of storage no earlier computation made, by " + std::string(n->opName()) + " " + n->specName();
        return {};
      }
      if (std::find(reads.begin(), reads.end(), p->second) == reads.end()) reads.push_back(p->second);
    }
    const std::vector<int> owned = ownedResults(*n, storage);
    for (size_t m = 0; m < owned.size(); ++m) {  // a later result reads the earlier ones (main())
      const int at = static_cast<int>(sequence.size());
      if (owned[m] >= 0) position[n->result(static_cast<size_t>(owned[m]))] = at;
      sequence.push_back({first + static_cast<int>(m), reads});
      reads.push_back(at);
    }
  }
  return sequence;
}

}  // namespace

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
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
  Expected<passes::TrainingPlan> joint = passes::chooseTrainingPlan(forward, bench::ilpStepOptions(passes::RematStrategy::None, {}));
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
  // A node with several results that own storage is one ILP node per result (gradc frees each
  // result after its own last reader): the first carries the node's FLOPs, the last its
  // workspace, and each reads the node's operands and the results before it, so the last one
  // runs with the operands, every result and the workspace held, as the node does ("group":
  // the first; bench/remat_ilp.py computes a group's members together).
  passes::IdIndex<ir::Node> ilpIndex(g.nodeIdBound());  // graph node -> its first ILP node
  std::vector<const ir::Node*> kept;                     // per ILP node: its graph node
  std::vector<int> keptResult;                           // per ILP node: its result (-1: none)
  for (const ir::Node* n : scheduled.order) {
    if (foldedView(*n, storage)) continue;
    ilpIndex.insert(n, static_cast<int>(kept.size()));
    for (int r : ownedResults(*n, storage)) {
      kept.push_back(n);
      keptResult.push_back(r);
    }
  }
  auto ilpOfOwner = [&](const ir::Value* owner) {
    const int first = ilpIndex.get(owner->producer());
    const std::vector<int> owned = ownedResults(*owner->producer(), storage);
    const auto at = std::find(owned.begin(), owned.end(), static_cast<int>(owner->resultIndex()));
    return first < 0 || at == owned.end() ? -1 : first + static_cast<int>(at - owned.begin());
  };
  std::vector<char> isOutput(kept.size(), 0);
  for (const ir::GraphOutput& out : g.outputs()) {
    const ir::Value* owner = storage.owner(out.value);
    if (owner->kind() == ir::ValueKind::Result) isOutput[static_cast<size_t>(ilpOfOwner(owner))] = 1;
  }

  nlohmann::json out;
  out["model"] = g.name();
  out["nodes"] = nlohmann::json::array();
  for (size_t i = 0; i < kept.size(); ++i) {
    const ir::Node& n = *kept[i];
    const int first = ilpIndex.get(&n);
    const bool last = i + 1 == kept.size() || kept[i + 1] != &n;
    const std::int64_t bytes = keptResult[i] >= 0 ? n.result(static_cast<size_t>(keptResult[i]))->type().bytes() : 0;
    std::vector<int> deps;
    for (const ir::Value* v : n.operands()) {
      const ir::Value* owner = storage.owner(v);
      if (owner->kind() != ir::ValueKind::Result) continue;
      const int d = ilpOfOwner(owner);
      if (d < 0) {
        std::fprintf(stderr, "remat_ilp_export: %s reads storage of a node the ILP leaves out\n", n.opName().data());
        return 1;
      }
      if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
    }
    for (int m = first; m < static_cast<int>(i); ++m) deps.push_back(m);
    out["nodes"].push_back({{"op", n.opName()},
                            {"phase", ir::phaseName(n.phase())},
                            {"spec", n.specName()},
                            {"flops", static_cast<int>(i) == first ? n.flops() : 0},
                            {"bytes", bytes},
                            {"workspace", last ? storage.workspaceBytes(&n) : 0},
                            {"output", isOutput[i] != 0},
                            {"group", first},
                            {"deps", deps}});
  }
  const passes::Liveness& none = scheduled.liveness;
  out["persistent_bytes"] = none.persistentBytes;
  out["none_peak"] = none.peakBytes;
  out["forward_flops"] = joint->report.forwardFlops;

  // gradc's side.
  Expected<passes::TrainingPlan> floor =
      passes::chooseTrainingPlan(forward, bench::ilpStepOptions(passes::RematStrategy::Auto, none.persistentBytes / 2));
  const std::int64_t smallest = floor ? -1 : floor.error().smallestFeasibleBytes;
  out["smallest_feasible"] = smallest;
  auto plan = [&](passes::RematStrategy s, std::optional<std::int64_t> budget) {
    Expected<passes::TrainingPlan> c = passes::chooseTrainingPlan(forward, bench::ilpStepOptions(s, budget));
    nlohmann::json j{{"budget", budget.value_or(-1)}, {"fits", c.ok()}};
    if (c) {
      j["peak"] = c->report.predictedPeakBytes;
      j["recompute_flops"] = c->report.recomputeFlops;
      j["plan"] = c->report.plan;
      if (s == passes::RematStrategy::Auto) {
        std::string why;
        nlohmann::json sequence = planSequence(g, storage, ilpIndex, c->graph, why);
        if (!sequence.empty())
          j["sequence"] = std::move(sequence);
        else
          j["sequence_error"] = why;
      }
    }
    return j;
  };
  out["sqrt"] = plan(passes::RematStrategy::Sqrt, std::nullopt);
  {
    ir::Graph copy = passes::remat::cloneGraph(g);
    Expected<passes::remat::Analysis> a = passes::remat::analyze(copy);
    out["checkpoint_sequential"] = nlohmann::json::array();
    if (a)
      for (const bench::SegmentPoint& sp : bench::checkpointSequentialPoints(copy, *a))
        out["checkpoint_sequential"].push_back(
            {{"segments", sp.segments}, {"peak", sp.peak}, {"recompute_flops", sp.recomputeFlops}});
  }
  out["gradc"] = nlohmann::json::array();
  for (double f : fractions)
    out["gradc"].push_back(plan(passes::RematStrategy::Auto,
                                smallest + static_cast<std::int64_t>(f * static_cast<double>(none.peakBytes - smallest))));
  std::fputs((out.dump(1) + "\n").c_str(), stdout);
  return 0;
}
