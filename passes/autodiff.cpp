#include "passes/autodiff.h"

#include <string>
#include <utility>
#include <vector>

#include "ir/printer.h"
#include "passes/build_node.h"
#include "passes/grad_rules.h"

namespace gradc::passes {

namespace {

// A set of the forward graph's values, by value id (below the graph's valueIdBound() before
// the backward is appended).
using ValueSet = std::vector<char>;

std::string quoted(const ir::Graph& graph, const ir::Node& node) {
  return "'" + ir::printNode(node, ir::ValueNames(graph)) + "'";
}

// A single-result bwd node built by the pass itself (seed, accumulation, zeros).
Expected<ir::Value*> emit1(ir::Graph& graph, std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs,
                           std::string specName) {
  Expected<ir::Node*> n = buildNode(graph, "autodiff", op, std::move(operands), std::move(attrs), ir::Phase::bwd,
                                    std::move(specName));
  if (!n) return n.error();
  return (*n)->result(0);
}

Expected<ir::Value*> fullOf(ir::Graph& graph, const ir::TensorType& type, double value, std::string specName) {
  return emit1(graph, "full", {}, {{"shape", type.shape}, {"dtype", type.dtype}, {"value", value}},
               std::move(specName));
}

Status checkPreconditions(const ir::Graph& graph) {
  for (const auto& n : graph.nodes())
    if (n->phase() != ir::Phase::fwd)
      return Error{"autodiff: the graph already has " + std::string(ir::phaseName(n->phase())) + " nodes (first: " +
                   quoted(graph, *n) + "); autodiff runs once, on a forward graph"};
  ir::Value* loss = graph.findOutput("loss");
  if (!loss) {
    std::string names;
    for (const ir::GraphOutput& out : graph.outputs()) names += (names.empty() ? "" : ", ") + out.name;
    return Error{"autodiff: the graph has no 'loss' output to differentiate (outputs: " +
                 (names.empty() ? std::string("none") : names) + ")"};
  }
  if (loss->type().rank() != 0 || !ir::isFloating(loss->type().dtype))
    return Error{"autodiff: the loss must be a float scalar such as f32[], got " + ir::toString(loss->type())};
  for (const auto& p : graph.params())
    if (ir::isLearned(*p) && graph.findOutput("grad." + p->name()))
      return Error{"autodiff: the graph already has an output 'grad." + p->name() + "'"};
  return {};
}

// Values that depend on a parameter (float values only: integers carry no gradient).
ValueSet dependOnParams(const ir::Graph& graph, const std::vector<ir::Node*>& forward) {
  ValueSet set(graph.valueIdBound(), 0);
  for (const auto& p : graph.params())
    if (ir::isFloating(p->type().dtype) && ir::isLearned(*p)) set[p->id()] = 1;
  for (const ir::Node* n : forward) {
    bool reached = false;
    for (const ir::Value* v : n->operands()) reached = reached || set[v->id()];
    if (!reached) continue;
    for (size_t r = 0; r < n->numResults(); ++r)
      if (ir::isFloating(n->result(r)->type().dtype)) set[n->result(r)->id()] = 1;
  }
  return set;
}

// Values the loss depends on.
ValueSet lossDependsOn(const ir::Graph& graph, const ir::Value* loss, const std::vector<ir::Node*>& forward) {
  ValueSet set(graph.valueIdBound(), 0);
  set[loss->id()] = 1;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const ir::Node* n = *it;
    bool reaches = false;
    for (size_t r = 0; r < n->numResults() && !reaches; ++r) reaches = set[n->result(r)->id()];
    if (reaches)
      for (const ir::Value* v : n->operands()) set[v->id()] = 1;
  }
  return set;
}

}  // namespace

Expected<bool> Autodiff::run(ir::Graph& graph) {
  if (Status s = checkPreconditions(graph); !s) return s.error();
  ir::Value* loss = graph.findOutput("loss");

  // The forward nodes, before any backward node is appended.
  std::vector<ir::Node*> forward;
  forward.reserve(graph.numNodes());
  for (const auto& n : graph.nodes()) forward.push_back(n.get());

  // 1. Relevance.
  const ValueSet fromParams = dependOnParams(graph, forward);
  const ValueSet toLoss = lossDependsOn(graph, loss, forward);
  auto needsGrad = [&](const ir::Value* v) { return fromParams[v->id()] && toLoss[v->id()]; };

  graph.setInsertionPoint(nullptr);
  // Gradient of each forward value so far (the running sum of the contributions found), by
  // value id; nullptr where none has been found.
  std::vector<ir::Value*> grads(graph.valueIdBound(), nullptr);
  const std::string lossSpec = loss->producer() ? loss->producer()->specName() : std::string("loss");

  // 2. Seed.
  bool changed = false;
  if (needsGrad(loss)) {
    Expected<ir::Value*> seed = fullOf(graph, loss->type(), 1.0, lossSpec);
    if (!seed) return seed.error();
    grads[loss->id()] = *seed;
    changed = true;
  }

  // 3. Reverse walk.
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    ir::Node& node = **it;
    std::vector<ir::Value*> resultGrads(node.numResults(), nullptr);
    bool anyResultGrad = false;
    for (size_t r = 0; r < node.numResults(); ++r)
      if (ir::Value* g = grads[node.result(r)->id()]) {
        resultGrads[r] = g;
        anyResultGrad = true;
      }
    if (!anyResultGrad) continue;
    std::vector<bool> operandNeeds(node.operands().size());
    bool anyOperandNeeds = false;
    for (size_t i = 0; i < operandNeeds.size(); ++i) {
      operandNeeds[i] = needsGrad(node.operand(i));
      anyOperandNeeds = anyOperandNeeds || operandNeeds[i];
    }
    if (!anyOperandNeeds) continue;

    GradRule rule = findGradRule(node.opName());
    if (!rule)
      return Error{"autodiff: op '" + std::string(node.opName()) + "' has no gradient rule, but node " +
                   quoted(graph, node) + " lies between a parameter and the loss"};
    GradBuilder builder(graph, node, std::move(resultGrads), operandNeeds);
    OperandGrads operandGrads = rule(builder);
    if (builder.error())
      return builder.error()->withContext("autodiff: cannot differentiate " + quoted(graph, node) + ": ");
    if (operandGrads.size() != node.operands().size())
      return Error{"autodiff: internal error: the gradient rule of '" + std::string(node.opName()) + "' returned " +
                   std::to_string(operandGrads.size()) + " gradients for " + std::to_string(node.operands().size()) +
                   " operands", ErrorKind::Internal};

    for (size_t i = 0; i < operandGrads.size(); ++i) {
      ir::Value* contribution = operandGrads[i];
      if (!operandNeeds[i] || !contribution) continue;
      ir::Value* operand = node.operand(i);
      if (contribution->type() != operand->type())
        return Error{"autodiff: internal error: the gradient rule of '" + std::string(node.opName()) +
                     "' gave operand " + std::to_string(i) + " a gradient of type " +
                     ir::toString(contribution->type()) + ", expected " + ir::toString(operand->type()), ErrorKind::Internal};
      ir::Value*& slot = grads[operand->id()];
      if (!slot) {
        slot = contribution;
        continue;
      }
      Expected<ir::Value*> sum = emit1(graph, "add", {slot, contribution}, {}, node.specName());
      if (!sum) return sum.error();
      slot = *sum;
    }
    // Every use of the results has been seen; their gradients are no longer needed.
    for (size_t r = 0; r < node.numResults(); ++r) grads[node.result(r)->id()] = nullptr;
  }

  // 4. One output per learned parameter (running statistics have none).
  for (const auto& p : graph.params()) {
    if (!ir::isLearned(*p)) continue;
    ir::Value* g = grads[p->id()];
    if (!g) {
      Expected<ir::Value*> zeros = fullOf(graph, p->type(), 0.0, p->name());
      if (!zeros) return zeros.error();
      g = *zeros;
    }
    graph.setOutput("grad." + p->name(), g);
    changed = true;
  }
  return changed;
}

}  // namespace gradc::passes
