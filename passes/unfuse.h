// Unfusing: the step a compiled artifact runs without generated kernels (its reference step).
//
// Every `fused` node becomes its body's ops again (ir/fused_body.h), one node per step, at the
// fused node's place in the schedule, with the step's attributes and spec layer and the fused
// node's phase; the users of each fused result read the matching step's result. Every one-pass
// optimizer update (the op table's Bool attribute `fused`, set by passes/fuse.h) takes its
// ATen-backed form (fused = false). Nothing else changes: the other nodes keep their order and
// attributes, so a step graph in schedule order stays one, and planMemory() (passes/memory/memory_plan.h)
// plans the result directly (each intermediate of a region is now a buffer of its own, and a
// region's inputs can die at their last step rather than at the region's end, so the peak
// differs, mostly upwards; the persistent buffers, and so their offsets, stay the same).
//
// Algorithm: one sweep over the nodes; each fused body is parsed once (ir::cachedFusedBody) and
// its steps are created (appended) through the op table's type rules, so a body the table
// refuses is an Error (a graph the fuse pass did not make); then one reorder puts each region's
// steps in its fused node's place. O(nodes + body steps). On an Error the graph is left half
// rewritten: callers work on a copy (referenceStep does).
//
// Invariants of the result: no `fused` node and no one-pass update remains; the graph computes
// what the fused graph computes with each op's ATen kernel (the generated kernels round as those
// kernels do, codegen/elementwise_ops.h); graph outputs keep their names; the program order is a
// topological order.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/memory/memory_plan.h"

namespace gradc::passes {

struct UnfuseStats {
  int regions = 0;         // fused nodes expanded
  int nodes = 0;           // nodes they became
  int onePassUpdates = 0;  // optimizer updates switched back to their ATen-backed kernels
};

// Unfuses `graph` in place (see above).
Expected<UnfuseStats> unfuseElementwise(ir::Graph& graph);

// The reference step of a scheduled step and its plan: a copy of `scheduled`, unfused, planned
// in its order; the plan keeps the compiled plan's budget, device reserve and strategy (its peak
// may exceed that budget: the intermediates the generated kernels kept in registers are
// buffers now). The compiled step's persistent buffers keep their offsets (checked: an Error
// otherwise).
struct ReferenceStep {
  ir::Graph graph;
  MemoryPlan plan;
  UnfuseStats stats;
};
Expected<ReferenceStep> referenceStep(const ir::Graph& scheduled, const MemoryPlan& compiled);

}  // namespace gradc::passes
