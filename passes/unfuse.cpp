// Unfusing fused regions and one-pass updates (passes/unfuse.h).
#include "passes/unfuse.h"

#include <memory>
#include <string>
#include <vector>

#include "ir/fused_body.h"
#include "passes/remat_strategies.h"

namespace gradc::passes {
namespace {

// Creates the steps of fused node `n`'s body (appended to the graph; the caller puts them in
// `n`'s place) into `made`, and gives their results `n`'s users; `n` is left without users.
Status expand(ir::Graph& graph, ir::Node& n, std::vector<ir::Node*>& made, UnfuseStats& stats) {
  const std::optional<std::string> text = ir::getString(n.attrs(), "body");
  if (!text) return Error{"internal: fused node of " + n.specName() + " has no body", ErrorKind::Internal};
  Expected<std::shared_ptr<const ir::FusedBody>> body = ir::cachedFusedBody(*text);
  if (!body) return body.error().withContext("fused node of " + n.specName() + ": ");
  if ((*body)->outputs.size() != n.numResults())
    return Error{"fused node of " + n.specName() + ": its body returns " + std::to_string((*body)->outputs.size()) +
                 " values for " + std::to_string(n.numResults()) + " results"};
  const size_t first = made.size();
  auto stepResult = [&](size_t i) { return made[first + i]->result(); };
  for (const ir::FusedStep& step : (*body)->steps) {
    std::vector<ir::Value*> operands;
    for (const ir::FusedOperand& o : step.operands) {
      const size_t i = static_cast<size_t>(o.index);
      if (o.isInput ? i >= n.numOperands() : i >= made.size() - first)
        return Error{"fused node of " + n.specName() + ": a step reads " + (o.isInput ? "$" : "%") +
                     std::to_string(o.index) + ", which does not exist"};
      operands.push_back(o.isInput ? n.operand(i) : stepResult(i));
    }
    Expected<ir::Node*> node = graph.create(*step.op, operands, step.attrs, n.phase(), step.specName);
    if (!node) return Error{"fused node of " + n.specName() + ": step " + std::to_string(made.size() - first) + " (" +
                            std::string(step.op->name) + "): " + node.error().message};
    made.push_back(*node);
  }
  for (size_t k = 0; k < n.numResults(); ++k) {
    ir::Value* from = n.result(k);
    ir::Value* to = stepResult(static_cast<size_t>((*body)->outputs[k]));
    if (to->type() != from->type())
      return Error{"fused node of " + n.specName() + ": result " + std::to_string(k) + " is " +
                   ir::toString(from->type()) + " but its step computes " + ir::toString(to->type())};
    graph.replaceAllUsesWith(from, to);
  }
  ++stats.regions;
  stats.nodes += static_cast<int>(made.size() - first);
  return {};
}

}  // namespace

Expected<UnfuseStats> unfuseElementwise(ir::Graph& graph) {
  UnfuseStats stats;
  std::vector<ir::Node*> fused;
  for (const auto& n : graph.nodes()) {
    if (n->op().role == ir::OpRole::FusedRegion) {
      fused.push_back(n.get());
      continue;
    }
    const ir::AttrSpec* onePass = ir::findAttrSpec(n->op(), "fused");
    if (onePass && onePass->kind == ir::AttrKind::Bool && ir::getBool(n->attrs(), "fused").value_or(false)) {
      n->attrs().erase("fused");
      ++stats.onePassUpdates;
    }
  }
  // The steps are appended (creating before an insertion point would search the node list once
  // per step), then every fused node's steps take its place in one reorder.
  graph.setInsertionPoint(nullptr);
  const size_t original = graph.numNodes();
  std::vector<std::vector<ir::Node*>> steps(fused.size());
  for (size_t i = 0; i < fused.size(); ++i)
    if (Status s = expand(graph, *fused[i], steps[i], stats); !s) return s.error();
  std::vector<ir::Node*> order;
  order.reserve(graph.numNodes());
  size_t next = 0;  // fused nodes come in program order
  for (size_t i = 0; i < original; ++i) {
    ir::Node* n = graph.nodes()[i].get();
    if (next < fused.size() && n == fused[next]) {
      order.insert(order.end(), steps[next].begin(), steps[next].end());
      ++next;
    }
    order.push_back(n);
  }
  graph.reorder(order);
  graph.eraseIf([](const ir::Node& n) { return n.op().role == ir::OpRole::FusedRegion; });
  return stats;
}

Expected<ReferenceStep> referenceStep(const ir::Graph& scheduled, const MemoryPlan& compiled) {
  ReferenceStep step{remat::cloneGraph(scheduled), {}, {}};
  Expected<UnfuseStats> stats = unfuseElementwise(step.graph);
  if (!stats) return stats.error();
  step.stats = *stats;
  step.plan = planMemory(step.graph);
  // The evaluation step shares the persistent buffers at the compiled plan's offsets: the
  // reference plan must place them identically (both put them first, in declaration order).
  bool same = step.plan.persistentBytes == compiled.persistentBytes;
  for (size_t i = 0; same && i < compiled.buffers.size(); ++i) {
    const PlannedBuffer& b = compiled.buffers[i];
    if (!b.persistent()) break;
    same = i < step.plan.buffers.size() && step.plan.buffers[i].name == b.name &&
           step.plan.buffers[i].offset == b.offset && step.plan.buffers[i].size == b.size;
  }
  if (!same) return Error{"internal: the reference step's plan places the persistent buffers differently from the "
                          "compiled step's", ErrorKind::Internal};
  step.plan.budgetBytes = compiled.budgetBytes;
  step.plan.reserveBytes = compiled.reserveBytes;
  step.plan.strategy = compiled.strategy;
  return step;
}

}  // namespace gradc::passes
