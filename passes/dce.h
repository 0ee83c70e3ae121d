// Dead-code elimination.
//
// Algorithm: one backward sweep over program order. A node is live if it has side effects
// (op table flag) or any of its results is used by a live node or is a graph output; since
// users come after producers, deciding nodes from last to first sees every user before its
// producer, so one sweep is exact: O(nodes + uses).
// Invariants: graph inputs, parameters and outputs are never removed; the relative order of
// surviving nodes is unchanged.
#pragma once

#include "passes/pass.h"

namespace gradc::passes {

class DeadCodeElimination final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  Expected<bool> run(ir::Graph& graph) override;
};

}  // namespace gradc::passes
