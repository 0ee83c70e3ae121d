// Gradient rules: how the autodiff pass differentiates each forward op. One table, keyed by op
// name (passes/grad_rules.cpp); nothing else switches over op kinds.
//
// A rule sees one forward node, the gradients of its results (nullptr for a result the loss
// does not depend on) and which operands need a gradient. It appends backward nodes through a
// GradBuilder and returns one gradient per operand: nullptr where the operand needs none or is
// not differentiable (embedding indices, class targets). Contract, checked by the pass: every
// returned gradient has exactly its operand's type, so broadcasting ops reduce with sum_to and
// everything else reproduces the operand shape.
//
// Backward and optimizer ops have no rules: gradc never differentiates twice.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::passes {

// What a rule builds with. Emitted nodes go to the graph's insertion point with phase bwd and
// the forward node's spec name, so a backward node can be traced to its layer.
//
// Failure is sticky: the first emit the op table rejects (a rule bug) or the first fail() (a
// case a rule does not support) is recorded in error(), and from then on every emit returns
// nullptr without touching the graph; an emit given a nullptr operand also returns nullptr.
// Rules are therefore straight-line code, and the pass checks error() once per rule.
class GradBuilder {
 public:
  GradBuilder(ir::Graph& graph, const ir::Node& node, std::vector<ir::Value*> resultGrads, std::vector<bool> needs);

  const ir::Node& node() const { return node_; }
  ir::Value* operand(size_t i) const { return node_.operand(i); }
  const ir::TensorType& operandType(size_t i) const { return node_.operand(i)->type(); }
  size_t numOperands() const { return node_.operands().size(); }
  ir::Value* result(size_t i = 0) const { return node_.result(i); }
  // Gradient of result i; nullptr when the loss does not depend on it.
  ir::Value* grad(size_t i = 0) const { return resultGrads_.at(i); }
  // Whether operand i lies on a path from a parameter to the loss.
  bool needs(size_t i) const { return needs_.at(i); }

  ir::Node* emit(std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs = {});
  // emit() for single-result ops: the result.
  ir::Value* emit1(std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs = {});
  // v summed down to `shape` (sum_to), or v itself when it already has that shape.
  ir::Value* sumTo(ir::Value* v, const ir::Shape& shape);
  // full{value = 0.0} of a type.
  ir::Value* zeros(const ir::TensorType& type);

  // Records that the rule cannot differentiate this node (the pass names the node).
  void fail(std::string message);
  const std::optional<Error>& error() const { return error_; }

 private:
  ir::Graph& graph_;
  const ir::Node& node_;
  std::vector<ir::Value*> resultGrads_;
  std::vector<bool> needs_;
  std::optional<Error> error_;
};

// One gradient per operand of b.node(), nullptr where none.
using OperandGrads = std::vector<ir::Value*>;
using GradRule = OperandGrads (*)(GradBuilder& b);

// Rules of the convolution, pooling and batch-norm ops (passes/grad_rules_conv.cpp).
namespace conv_rules {
OperandGrads gradConv2d(GradBuilder& b);
OperandGrads gradBatchNorm(GradBuilder& b);
OperandGrads gradMaxPool2d(GradBuilder& b);
OperandGrads gradAvgPool2d(GradBuilder& b);
OperandGrads gradAdaptiveAvgPool2d(GradBuilder& b);
}  // namespace conv_rules

// The rule of an op; nullptr when the op has none.
GradRule findGradRule(std::string_view opName);
// Every op with a rule, sorted by name.
std::vector<std::string_view> gradRuleOps();

}  // namespace gradc::passes
