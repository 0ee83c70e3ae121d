// Unfusing fused regions and one-pass updates (passes/unfuse.h).
#include "passes/unfuse.h"

#include <memory>
#include <string>
#include <vector>

#include "ir/fused_body.h"
#include "passes/remat_strategies.h"

namespace gradc::passes {
namespace {

// Replaces fused node `n` by its body's steps, created before it; `n` is left without users.
Status expand(ir::Graph& graph, ir::Node& n, UnfuseStats& stats) {
  const std::optional<std::string> text = ir::getString(n.attrs(), "body");
  if (!text) return Error{"internal: fused node of " + n.specName() + " has no body"};
  Expected<std::shared_ptr<const ir::FusedBody>> body = ir::cachedFusedBody(*text);
  if (!body) return Error{"fused node of " + n.specName() + ": " + body.error().message};
  if ((*body)->outputs.size() != n.numResults())
    return Error{"fused node of " + n.specName() + ": its body returns " + std::to_string((*body)->outputs.size()) +
                 " values for " + std::to_string(n.numResults()) + " results"};
  graph.setInsertionPoint(&n);
  std::vector<ir::Value*> made;
  for (const ir::FusedStep& step : (*body)->steps) {
    std::vector<ir::Value*> operands;
    for (const ir::FusedOperand& o : step.operands) {
      const size_t i = static_cast<size_t>(o.index);
      if (o.isInput ? i >= n.numOperands() : i >= made.size())
        return Error{"fused node of " + n.specName() + ": a step reads " + (o.isInput ? "$" : "%") +
                     std::to_string(o.index) + ", which does not exist"};
      operands.push_back(o.isInput ? n.operand(i) : made[i]);
    }
    Expected<ir::Node*> node = graph.create(*step.op, operands, step.attrs, n.phase(), step.specName);
    if (!node) return Error{"fused node of " + n.specName() + ": step " + std::to_string(made.size()) + " (" +
                            std::string(step.op->name) + "): " + node.error().message};
    made.push_back((*node)->result());
  }
  for (size_t k = 0; k < n.numResults(); ++k) {
    ir::Value* from = n.result(k);
    ir::Value* to = made.at(static_cast<size_t>((*body)->outputs[k]));
    if (to->type() != from->type())
      return Error{"fused node of " + n.specName() + ": result " + std::to_string(k) + " is " +
                   ir::toString(from->type()) + " but its step computes " + ir::toString(to->type())};
    graph.replaceAllUsesWith(from, to);
  }
  ++stats.regions;
  stats.nodes += static_cast<int>(made.size());
  return {};
}

}  // namespace

Expected<UnfuseStats> unfuseElementwise(ir::Graph& graph) {
  UnfuseStats stats;
  std::vector<ir::Node*> fused;
  for (const auto& n : graph.nodes()) {
    if (n->opName() == "fused") {
      fused.push_back(n.get());
      continue;
    }
    const ir::AttrSpec* onePass = ir::findAttrSpec(n->op(), "fused");
    if (onePass && onePass->kind == ir::AttrKind::Bool && ir::getBool(n->attrs(), "fused").value_or(false)) {
      n->attrs().erase("fused");
      ++stats.onePassUpdates;
    }
  }
  for (ir::Node* n : fused)
    if (Status s = expand(graph, *n, stats); !s) {
      graph.setInsertionPoint(nullptr);
      return Error{s.message()};
    }
  graph.setInsertionPoint(nullptr);
  graph.eraseIf([](const ir::Node& n) { return n.opName() == "fused"; });
  return stats;
}

Expected<ReferenceStep> referenceStep(const ir::Graph& scheduled, const MemoryPlan& compiled) {
  ReferenceStep step{remat::cloneGraph(scheduled), {}, {}};
  Expected<UnfuseStats> stats = unfuseElementwise(step.graph);
  if (!stats) return stats.error();
  step.stats = *stats;
  step.plan = planMemory(step.graph);
  if (step.plan.persistentBytes != compiled.persistentBytes)
    return Error{"internal: the reference step holds " + std::to_string(step.plan.persistentBytes) +
                 " persistent bytes, the compiled step " + std::to_string(compiled.persistentBytes)};
  step.plan.budgetBytes = compiled.budgetBytes;
  step.plan.reserveBytes = compiled.reserveBytes;
  step.plan.strategy = compiled.strategy;
  return step;
}

}  // namespace gradc::passes
