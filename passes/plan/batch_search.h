// The largest batch whose training step fits a byte budget (`--set batch=auto --budget B`),
// searched with the planner: each probe builds the step at one batch and asks the training
// planner (passes/plan/training_planner.h) whether some configuration and recompute plan fits.
// A probe that fits says its chosen plan's peak; one that does not says the batch's smallest
// feasible budget S(b) (the least peak over every plan the request allows).
//
// Algorithm (searchLargestBatch), over batches that are multiples of m:
//   1. Probe the start (the spec's own batch, rounded down to a multiple, at least m).
//   2. While no batch is known to be refused: jump up from the largest fitting batch lo to
//      max(2 lo, lo x budget / peak(lo)) (a peak grows at least in proportion to the batch's
//      share of it, so the jump does not pass the largest batch that fits without recompute).
//   3. While no batch is known to fit: from the smallest refused batch hi, to
//      hi x budget / S(hi) (at most hi - m; after a second refusal, at most hi / 2); down to
//      m, where a refusal ends the search.
//   4. With lo fitting and hi refused: the batch where the line through (lo, peak(lo)) and
//      (hi, S(hi)) meets the budget (S grows about linearly in the batch: persistent state plus
//      activations per example), kept strictly inside (lo, hi); when two such steps in a row
//      do not halve the bracket, the midpoint instead.
//   5. It ends when hi = lo + m: lo is the answer and hi, the next batch, was refused with its
//      smallest feasible budget.
//
// What it relies on, and checks: feasibility is monotone in the batch (S(b) does not fall as b
// grows). Each probe is taken strictly inside the bracket, so a probe never contradicts an
// earlier one; tests/passes/batch_search_test.cpp checks the property on bundled models and the
// answer against a scan of every batch.
// Cost: about log2 of the answer's ratio to the start probes to bracket it, then a few secant
// steps (bisection at worst: log2 of the bracket in multiples).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ir/status.h"

namespace gradc::passes {

// What the planner says of one batch. Bytes are budget bytes (with any device reserve).
struct BatchProbe {
  std::int64_t batch = 0;
  bool fits = false;
  std::int64_t peakBytes = 0;              // fits: the chosen plan's predicted peak
  std::int64_t smallestFeasibleBytes = 0;  // refused: the least budget any plan at this batch fits
  std::string plan;                        // fits: what the chosen plan does, in one line
  double stepSeconds = -1;                 // fits, with a cost table: the plan's predicted step time
  double seconds = 0;                      // the probe's compile time
};

// Builds and plans the step at `batch`; an Error other than ErrorKind::InfeasibleBudget ends the
// search (a spec that does not lower at that batch, a flag that does not apply).
using BatchOracle = std::function<Expected<BatchProbe>(std::int64_t batch)>;

// No search goes past this batch (per rank); a step that still fits there is reported as such.
inline constexpr std::int64_t kMaxSearchedBatch = std::int64_t{1} << 24;

struct BatchSearchOptions {
  std::int64_t budgetBytes = 0;
  std::int64_t multiple = 1;              // every probed batch is a multiple of this
  std::int64_t start = 1;                 // first probe (rounded down to a multiple, at least one)
  std::int64_t maxBatch = kMaxSearchedBatch;
};

struct BatchSearchResult {
  std::int64_t batch = 0;                // the largest batch that fits; 0: not even `multiple`
  std::optional<BatchProbe> chosen;      // its probe
  std::optional<BatchProbe> next;        // the next multiple, refused (absent at maxBatch)
  std::vector<BatchProbe> probes;        // in the order they were made
  bool reachedMax = false;               // maxBatch fits: the search stopped there
};

Expected<BatchSearchResult> searchLargestBatch(const BatchOracle& probe, const BatchSearchOptions& options);

}  // namespace gradc::passes
