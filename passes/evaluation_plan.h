// The evaluation step's memory plan inside the training step's arena.
//
// Between two training steps the training arena holds only its persistent buffers
// (parameters, optimizer state, inputs); every other byte is free until the next step begins.
// An evaluation forward (dropout off, batch norm with running statistics) run at that moment
// therefore needs no memory of its own: it reads the parameters where the training step keeps
// them and places its activations in the bytes the step's activations use.
//
// Algorithm. `eval` is planned on its own first (planMemory). Each of its persistent buffers
// that the host plan holds under the same name, kind and type (the parameters; inputs of the
// same shape) is *shared*: it takes the host buffer's offset. The remaining buffers (activations,
// workspaces, persistent buffers the host lacks) are placed again by assignOffsets, above the
// end of the host's persistent buffers. The arena the two plans need together is the larger of
// the host's and that end plus the placement's extent.
//
// The evaluation's peak is then the host's persistent bytes plus, at its highest step, what
// the evaluation holds beyond the shared buffers; its timeline is stated the same way, so the
// plan reads as what the device holds while evaluation runs.
//
// Invariants: every shared buffer is at its host offset; no other buffer overlaps a host
// persistent buffer (so evaluation never writes the weights or optimizer state); no two
// evaluation buffers alive at a common step share a byte (verifyNoOverlap).
#pragma once

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/memory/memory_plan.h"

namespace gradc::passes {

struct EvaluationPlan {
  MemoryPlan plan;                 // offsets in the host's arena; peak and timeline as described
  std::int64_t sharedBytes = 0;    // persistent bytes read in place from the host's buffers
  std::int64_t arenaBytes = 0;     // the arena both plans need (>= the host's)
};

// `eval` in schedule order; `host` the training step's plan.
Expected<EvaluationPlan> planEvaluationInside(const ir::Graph& eval, const MemoryPlan& host);

}  // namespace gradc::passes
