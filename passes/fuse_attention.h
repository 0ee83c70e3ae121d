// Fusing scaled dot-product attention: the decomposition the spec's attention op lowers to
// (frontend/lower_attention.cpp)
//
//   scores = matmul(q, transpose(k, last two axes)) -> scale{factor} -> [causal_mask]
//   probs  = softmax(scores, last axis) -> [dropout{p, rng, rng_offset}]
//   out    = matmul(probs, v)
//
// becomes one attention(q, k, v){causal, scale = factor, p, rng, rng_offset} node
// (ir/ops_attention.cpp), whose kernels never hold the [..., S, S_kv] scores or probabilities: the
// step keeps the output and one log-sum-exp per query row for the backward, so the quadratic
// buffers leave the plan (the planner has nothing quadratic to keep or recompute).
//
// Pipeline position: on the forward, after the data-parallel partition (whose rng_offset of the
// dropout node the attention node inherits, in the same units: elements of the probabilities),
// before micro-batching and autodiff, in every configuration the planner builds when elementwise
// fusion is on (passes/plan/step_pipeline.h; the default of gradc compile and train, and
// --no-fuse keeps the decomposition).
//
// Match, from each forward softmax over its last axis: the chain above with every intermediate
// (scores, scaled, masked, probs, dropped) read only by the next step and not a graph output; the
// transpose swapping the last two axes of k; f32 or f64 operands of one rank; k's and v's leading
// axes equal, each q's or 1 (grouped-query attention's shared heads), q's leading axes those of
// the scores. Anything else is left as it is.
//
// Invariants: the output and every gradient equal the decomposition's up to float summation order
// (tests/runtime/attention_test.cpp); the dropout masks are the same elements; the transpose of k
// stays when something else reads it (dead-code elimination removes it otherwise); a graph
// without a match is unchanged.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::passes {

// Attention cores fuseAttention would rewrite.
int countFusableAttention(const ir::Graph& forward);
// Rewrites every match (see above); returns how many.
Expected<int> fuseAttention(ir::Graph& forward);

}  // namespace gradc::passes
