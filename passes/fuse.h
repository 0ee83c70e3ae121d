// Elementwise fusion: maximal regions of elementwise ops become one `fused` node each
// (ir/ops_fused.cpp), whose generated kernel (codegen/) reads the region's inputs once, keeps
// every intermediate in registers and writes only the values used outside the region.
//
// What fuses: ops the op table marks elementwise and not random (ir::isFusableOp: add, sub,
// mul, scale, relu, gelu, tanh, sigmoid, silu, exp and their backward ops), computing f32 or
// f64, of one phase (forward, backward, optimizer: a region never mixes them, so remat and the
// scheduler see phases as before). A region's iteration space is the shape of every member's
// result; operands of other shapes are broadcast into it. Reductions, matmuls, views, random
// ops and collectives end a region. A strided operand (a view: a slice, a split's part, an
// unbound step, a transpose) is read in place: the fused node records every operand's static
// strides (its `strides` attribute, from the storage model, passes/memory/storage.h) and its
// kernel is generated for them, so the planner's model (no hidden copies) stays exact and an
// LSTM's gate activations over the four column slices of its gates fuse with the cell update.
//
// Algorithm: one sweep in program order. Node n joins (and merges) the regions of those of its
// operands' producers that are in a region of the same phase and iteration space, provided (1) no
// node outside such a region uses its values before n: the fused node takes the position of its
// last member, so every outside user must come after it (this is also what keeps the graph
// acyclic: a path region -> outside node -> n would need an outside user before n); and (2) for
// each value the region reads, no node that allocates runs between its last read (the region's
// last member, or a later reader outside it) and n, unless the value is alive at n anyway: the
// fused node reads every input at its own position, so fusing across an allocation would keep
// the region's inputs alive through it (fusing a gradient accumulation chain whose terms are
// computed in between would hold all the terms at once). Two branches that read the same value
// (an LSTM cell's d(o) = dh * tanh(c) and d(tanh c) = dh * o) may thus run one after the other
// and still fuse. So fusion never lengthens a buffer's life past an allocation,
// and removes the intermediates: without recompute a fused step's plan is no larger than the
// unfused one's (a test checks it on the bundled models; a recompute strategy plans the fused
// graph on its own terms). Otherwise n starts a region of its own. Regions of one node stay as they are. Then each region becomes a
// fused node at its last member's place: its operands are the values it reads from outside (in
// first-read order), its results the members used outside the region or as graph outputs (in
// program order). O(nodes + uses * region size); regions are capped at kMaxFusedSteps steps.
//
// Optimizer updates: an op whose table entry has the optional Bool attribute `fused` (adamw_step)
// gets fused = true when it updates f32 or f64 tensors none of which may be strided: its kernel
// then reads and writes each element once (runtime/kernels/kernels_optimizer.cpp) instead of one ATen call
// per operation, and needs no workspace.
//
// Invariants: the graph computes the same values (the fused kernel's arithmetic is each op's,
// codegen/elementwise_ops.h); graph outputs keep their names; nodes that are not fused keep
// their relative order; the program order stays a topological order.
#pragma once

#include "passes/pass.h"

namespace gradc::passes {

inline constexpr int kMaxFusedSteps = 64;
inline constexpr int kMaxFusedOperands = 32;

struct FuseStats {
  int regions = 0;         // fused nodes created
  int fusedNodes = 0;      // nodes they replaced
  int onePassUpdates = 0;  // optimizer updates switched to their one-pass kernel
};

// Fuses `graph` in place. An Error is a bug (a region whose body the op table refuses).
Expected<FuseStats> fuseElementwise(ir::Graph& graph);

class FuseElementwise final : public Pass {
 public:
  std::string_view name() const override { return "fuse"; }
  Expected<bool> run(ir::Graph& graph) override;
};

}  // namespace gradc::passes
