#include "passes/plan/batch_search.h"

#include <algorithm>
#include <string>

namespace gradc::passes {

namespace {

std::int64_t roundDown(double value, std::int64_t multiple) {
  if (!(value > 0)) return 0;
  const double capped = std::min(value, static_cast<double>(kMaxSearchedBatch) * 2);
  return static_cast<std::int64_t>(capped) / multiple * multiple;
}

}  // namespace

Expected<BatchSearchResult> searchLargestBatch(const BatchOracle& probe, const BatchSearchOptions& o) {
  if (o.multiple < 1) return Error{"the batch multiple must be at least 1, got " + std::to_string(o.multiple)};
  if (o.budgetBytes <= 0) return Error{"a batch is searched under a positive budget"};
  const std::int64_t m = o.multiple;
  const std::int64_t top = o.maxBatch / m * m;
  if (top < m)
    return Error{"no batch up to " + std::to_string(o.maxBatch) + " is a multiple of " + std::to_string(m)};
  const auto budget = static_cast<double>(o.budgetBytes);

  BatchSearchResult result;
  std::optional<BatchProbe> lo;  // the largest batch known to fit
  std::optional<BatchProbe> hi;  // the smallest batch known to be refused
  auto take = [&](std::int64_t batch) -> Status {
    Expected<BatchProbe> p = probe(batch);
    if (!p) return p.error();
    p->batch = batch;
    result.probes.push_back(*p);
    if (p->fits) lo = *p;
    else hi = *p;
    return Status::success();
  };

  if (Status s = take(std::clamp(roundDown(static_cast<double>(o.start), m), m, top)); !s) return s.error();
  int slowSteps = 0;  // bracket steps in a row that did not halve it
  int descents = 0;   // refusals before any fit: after the first, at least halve
  for (;;) {
    std::int64_t next = 0;
    if (!hi) {
      if (lo->batch >= top) {
        result.reachedMax = true;
        break;
      }
      const double proportional = static_cast<double>(lo->batch) * budget / static_cast<double>(std::max<std::int64_t>(lo->peakBytes, 1));
      next = std::min(std::max(2 * lo->batch, roundDown(proportional, m)), top);
    } else if (!lo) {
      if (hi->batch <= m) break;  // not even the smallest batch fits
      const double proportional = static_cast<double>(hi->batch) * budget / static_cast<double>(hi->smallestFeasibleBytes);
      next = roundDown(proportional, m);
      if (descents++ > 0) next = std::min(next, hi->batch / 2 / m * m);
      next = std::clamp(next, m, hi->batch - m);
    } else {
      if (hi->batch - lo->batch <= m) break;
      const std::int64_t width = hi->batch - lo->batch;
      if (slowSteps >= 2) {
        next = lo->batch + (width / 2) / m * m;
        slowSteps = 0;
      } else {
        const double rise = static_cast<double>(hi->smallestFeasibleBytes - lo->peakBytes);
        const double at = static_cast<double>(lo->batch) +
                          (budget - static_cast<double>(lo->peakBytes)) * static_cast<double>(width) / std::max(rise, 1.0);
        next = roundDown(at, m);
      }
      next = std::clamp(next, lo->batch + m, hi->batch - m);
      const std::int64_t before = width;
      if (Status s = take(next); !s) return s.error();
      const std::int64_t after = hi->batch - lo->batch;
      slowSteps = 2 * after > before ? slowSteps + 1 : 0;
      continue;
    }
    if (Status s = take(next); !s) return s.error();
  }
  if (lo) {
    result.batch = lo->batch;
    result.chosen = lo;
  }
  if (hi && (!lo || hi->batch == lo->batch + m)) result.next = hi;
  return result;
}

}  // namespace gradc::passes
