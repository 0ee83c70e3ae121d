// Reverse-mode automatic differentiation: forward graph -> joint forward + backward graph.
//
// Input: a forward graph (every node phase fwd) with an output "loss" holding a float scalar.
// Output: the same graph with backward nodes appended and, for every parameter p in
// graph.params() order, an output "grad.<p>" of exactly p's type. Graph inputs (data) get no
// gradients. The "loss" output and every other output stay.
//
// Algorithm:
//   1. Relevance. A forward sweep marks the float values that depend on a parameter; a
//      backward sweep marks the values the loss depends on. Only values marked by both need a
//      gradient, so nothing is built for embedding indices, zeros constants, data-only
//      branches or outputs other than the loss.
//   2. Seed: d loss / d loss = full{shape = [], value = 1.0} of the loss dtype (spec name of
//      the loss node).
//   3. One walk over the forward nodes in reverse program order. A node with a gradient on
//      any result runs its rule (passes/grad_rules.h), which appends backward nodes (phase
//      bwd, spec name of the forward node) at the end of the graph. The rule's operand
//      gradients are accumulated eagerly: a value with several uses gets
//      add(add(c1, c2), c3) over its contributions c1, c2, c3 in the order the walk discovers
//      them (reverse program order of the uses; operand order within one node). Reverse
//      program order visits every use of a value before its definition, so a gradient is
//      complete when its producer's rule reads it.
//   4. Parameters without a gradient (the loss does not depend on them) get full zeros of
//      their type (spec name = the parameter's name); then the grad.<p> outputs are added
//      in parameter order.
//
// Complexity: O(nodes + uses) time and space (hash sets and maps keyed by value).
//
// Invariants of the result: forward nodes are unchanged and still come first; backward
// nodes are in a valid program order (each reads only forward values and earlier backward
// values); every grad.<p> has exactly p's type; output text is deterministic, since every
// decision follows program and operand order, never pointer order.
//
// Errors (user-facing): no "loss" output; a loss that is not a float scalar; a node between a
// parameter and the loss whose op has no gradient rule (names the op and the node); a graph
// that already has non-forward nodes (autodiff runs once, on a forward graph).
#pragma once

#include "passes/pass.h"

namespace gradc::passes {

class Autodiff final : public Pass {
 public:
  std::string_view name() const override { return "autodiff"; }
  Expected<bool> run(ir::Graph& graph) override;
};

}  // namespace gradc::passes
