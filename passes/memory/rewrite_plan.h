// A graph edit as data: copies of existing nodes to insert, and operands to rewire to them.
// The recompute planner writes one (remat::planRewrite, passes/remat_strategies.h) and applies
// it (remat::applyRewrite); the memory model's step graph (passes/memory/step_graph.h) measures
// the graph it would make without touching the graph. A neutral description both read: the
// memory model does not depend on remat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace gradc::passes {

// Where an inserted copy (or a rewired operand) reads: an original value, or a result of an earlier clone.
struct RewriteSource {
  const ir::Value* value = nullptr;
  int clone = -1;
  unsigned result = 0;
};
struct CloneOp {
  const ir::Node* of;
  size_t before;        // inserted before the node at this position
  std::uint32_t first;  // its operands: RewritePlan::operands[first, first + of->numOperands())
  std::uint32_t node;   // of->id(), kept here so that walking a plan need not load the nodes
};
struct Rewire {
  ir::Node* node;
  unsigned operand;
  RewriteSource to;
};
struct RewritePlan {
  std::vector<CloneOp> clones;  // in creation order (a valid program order)
  std::vector<RewriteSource> operands;
  std::vector<Rewire> rewires;
  std::int64_t recomputeFlops = 0;
  int onDemandClones = 0;  // clones the plan did not schedule (recomputed where needed)
};

}  // namespace gradc::passes
