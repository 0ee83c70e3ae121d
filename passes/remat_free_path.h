// Free recompute chosen value by value at the scheduled peak: a path of proposals between
// keeping everything and the free-recompute tiers (passes/remat_strategies.h, Episode::freeDrop).
//
// Why: the tiers drop every free value up to some FLOPs per element (or only those made early
// in the forward), all or nothing. The exact optimum (bench/remat_ilp.py) drops a subset: on a
// 2-layer GPT the first block's layer norms and both GELUs but not the last block's layer
// norms, which are recomputed for a backward that runs while memory is at its highest anyway.
// Which values pay depends on where the scheduled step peaks, and that moves as values go.
//
// Algorithm (greedy, like a knapsack's by ratio, with the peak re-measured at each step):
//   S = {} (no free value dropped). Repeat:
//     1. Measure S: its rewrite plan (remat::planRewrite), step graph, the schedule pass's order
//        and the first step p where that order peaks.
//     2. The values that could lower that peak: free values not in S and not yet tried whose
//        own storage (views save nothing) is made before p, read after p, and not read by
//        the node at p.
//     3. Of those, the one with the most bytes per FLOP of its producer (zero-FLOP values
//        first); ties to the smaller (finer steps: four layer norms' outputs before one GELU's
//        four times their size at the same cost per byte), then to the earlier in the forward
//        (it lives longer). None left: stop.
//     4. Measure S + {v}: when its scheduled peak is no higher than S's, S grows by v and
//        S is a proposal ("recompute k cheap values chosen one by one"); else v is tried no
//        more (a peak that moves elsewhere is kept: two equal peaks need two values each).
//   Then the path's end less what its peak does without: each value of S, most FLOPs first,
//   is left out when the peak stays; the result, when smaller, is one more proposal (the
//   small steps of 3. take values an earlier large one makes useless: on the 2-layer GPT the
//   last block's layer norms once both GELUs are recomputed).
//   Each value is tried at most twice: at most 2 |free values| + 1 schedules. With
//   micro-batches the episodes repeat one forward: a value is chosen for all of them at once
//   (one item per free value of the forward, as the other proposals take one schedule for every
//   episode), so the path is no longer with more micro-batches, only each schedule larger.
//
// The tail: with these plans, forward nodes of the tail that read a dropped value made before
// it (the LSTM's stack of every h_t) read a copy recomputed for them (Episode::freeTailUses),
// so the original dies after its last reader before the tail; the copy serves the backward
// too. On an 8-step LSTM that is what the exact optimum does at its tightest budgets.
//
// Invariants: the path depends only on the graph (no budget), so a chooser that takes the
// cheapest proposal fitting a budget keeps its recompute monotone in the budget; each
// proposal's set contains the one before it; its rewrite is an ordinary free-recompute plan
// (EpisodePlan::freeChosen), bit-identical at run time like every other one
// (tests/runtime/remat_equivalence_test.cpp). Only on graphs of at most kExhaustiveMaxNodes
// nodes, where freeDrop is computed at all.
#pragma once

#include <vector>

#include "passes/remat_strategies.h"
#include "passes/memory/step_graph.h"

namespace gradc::passes::remat {

// The path's proposals, in path order (fewest values first), for the graph `facts` describes
// (the one `analysis` was made of).
std::vector<Candidate> freePathCandidates(const Analysis& analysis, const StepFacts& facts);

// candidates(analysis, strategy), and with `measureOn` (the step facts of the analysed graph)
// auto's end with the free-recompute path, measured on them to be made (a schedule per value it
// tries); without, the path is left out.
std::vector<Candidate> candidatesWithFreePath(const Analysis& analysis, RematStrategy strategy,
                                              const StepFacts* measureOn);

}  // namespace gradc::passes::remat
