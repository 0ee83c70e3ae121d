#include "passes/remat_chain.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace gradc::passes::chain {

namespace {
constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max() / 8;

std::int64_t ceilDiv(std::int64_t a, std::int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }
// To the nearest unit (halves up). With unit 1 this is exact.
std::int64_t roundDiv(std::int64_t a, std::int64_t b) { return a <= 0 ? 0 : (a + b / 2) / b; }
}  // namespace

std::string toString(const Op& op) {
  switch (op.kind) {
    case OpKind::ForwardTransient: return "Ft" + std::to_string(op.stage);
    case OpKind::ForwardCheckpoint: return "Fc" + std::to_string(op.stage);
    case OpKind::ForwardAll: return "F*" + std::to_string(op.stage);
    case OpKind::Backward: return "B" + std::to_string(op.stage);
  }
  return "?";
}

std::string toString(const Schedule& s) {
  std::string out;
  for (const Op& op : s) out += (out.empty() ? "" : " ") + toString(op);
  return out;
}

std::int64_t totalForwardCost(std::span<const Stage> stages) {
  std::int64_t total = 0;
  for (const Stage& s : stages) total += s.forwardCost;
  return total;
}

// ---- simulation ----------------------------------------------------------------------------------

Simulation simulate(std::span<const Stage> stages, const Schedule& schedule, External external) {
  const std::int64_t externalBytes = external.bytes;
  enum class Held : std::uint8_t { None, Transient, Checkpoint };
  const int n = static_cast<int>(stages.size());
  std::vector<Held> boundary(static_cast<size_t>(n), Held::None);
  std::vector<bool> full(static_cast<size_t>(n), false);
  Simulation sim;
  // The external buffers: through the first pass always, through the backward when it recomputes.
  bool recomputes = false, backwardSeen = false;
  for (const Op& op : schedule) {
    if (op.kind == OpKind::Backward) backwardSeen = true;
    else if (backwardSeen) recomputes = true;
  }
  std::int64_t mem = externalBytes;
  bool externalHeld = true;
  int nextBackward = n - 1;
  auto fail = [&](const Op& op, const std::string& why) {
    sim.ok = false;
    sim.error = toString(op) + ": " + why;
    return sim;
  };
  auto available = [&](int i) { return i < 0 || boundary[static_cast<size_t>(i)] != Held::None || full[static_cast<size_t>(i)]; };
  for (const Op& op : schedule) {
    const int i = op.stage;
    if (i < 0 || i >= n) return fail(op, "no such stage");
    const Stage& st = stages[static_cast<size_t>(i)];
    const auto ui = static_cast<size_t>(i);
    if (op.kind == OpKind::Backward) {
      if (externalHeld && !recomputes) {
        mem -= externalBytes;
        externalHeld = false;
      }
      if (i != nextBackward) return fail(op, "out of order (next backward is " + std::to_string(nextBackward) + ")");
      if (!full[ui]) return fail(op, "its activations are not stored");
      if (!available(i - 1)) return fail(op, "its input boundary is not available");
      sim.peak = std::max(sim.peak, mem + st.gradientBytes + st.backwardBytes);
      full[ui] = false;
      mem -= st.storedBytes;
      mem += st.gradientBytes;
      if (i > 0 && boundary[ui - 1] != Held::None) {
        boundary[ui - 1] = Held::None;
        mem -= stages[ui - 1].boundaryBytes;
      }
      --nextBackward;
      continue;
    }
    if (i > nextBackward) return fail(op, "the stage is already back-propagated");
    if (externalHeld && !recomputes && i > external.lastReader) {
      mem -= externalBytes;
      externalHeld = false;
    }
    if (!available(i - 1)) return fail(op, "its input boundary is not available");
    if (op.kind == OpKind::ForwardAll) {
      if (full[ui]) return fail(op, "already stored");
      // Persistence: the input of a full forward stays until this stage's backward, so it
      // must be held (a checkpoint or inside abar_{i-1}), not a transient of a sweep.
      if (i > 0 && boundary[ui - 1] == Held::Transient && !full[ui - 1])
        return fail(op, "its input is a transient boundary");
      full[ui] = true;
      mem += st.storedBytes;
    } else {
      if (boundary[ui] != Held::None) return fail(op, "boundary already stored");
      boundary[ui] = op.kind == OpKind::ForwardTransient ? Held::Transient : Held::Checkpoint;
      mem += st.boundaryBytes;
    }
    sim.cost += st.forwardCost;
    sim.peak = std::max(sim.peak, mem);
    if (i > 0 && boundary[ui - 1] == Held::Transient) {
      boundary[ui - 1] = Held::None;
      mem -= stages[ui - 1].boundaryBytes;
    }
  }
  if (nextBackward != -1) {
    sim.ok = false;
    sim.error = "stage " + std::to_string(nextBackward) + " is never back-propagated";
    return sim;
  }
  sim.ok = true;
  return sim;
}

// ---- fixed schedules -----------------------------------------------------------------------------

Schedule storeAllSchedule(int n) {
  Schedule s;
  for (int i = 0; i < n; ++i) s.push_back({OpKind::ForwardAll, i});
  for (int i = n - 1; i >= 0; --i) s.push_back({OpKind::Backward, i});
  return s;
}

Schedule sqrtSchedule(std::span<const Stage> stages, int segments) {
  const int n = static_cast<int>(stages.size());
  if (segments <= 0) segments = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n)))));
  segments = std::min(segments, n);
  if (segments <= 1 || n < 3) return storeAllSchedule(n);
  std::vector<int> ends = groupStages(stages, segments);
  std::vector<char> recomputed(ends.size(), 1);
  recomputed.back() = 0;
  return segmentSchedule(ends, recomputed);
}

Schedule segmentSchedule(std::span<const int> ends, std::span<const char> recomputed, std::span<const char> keepEnd) {
  auto keeps = [&](size_t g) { return keepEnd.empty() || keepEnd[g]; };
  Schedule s;
  int begin = 0;
  for (size_t g = 0; g < ends.size(); ++g) {
    for (int i = begin; i < ends[g]; ++i)
      s.push_back({!recomputed[g]                   ? OpKind::ForwardAll
                   : i + 1 == ends[g] && keeps(g) ? OpKind::ForwardCheckpoint
                                                   : OpKind::ForwardTransient,
                   i});
    begin = ends[g];
  }
  for (size_t g = ends.size(); g-- > 0;) {
    const int lo = g == 0 ? 0 : ends[g - 1];
    // A recomputed segment before this one that kept no end boundary runs again just before
    // this segment's first backward needs that boundary.
    const bool before = g > 0 && recomputed[g - 1] && !keeps(g - 1) && !recomputed[g];
    if (recomputed[g] && keeps(g))
      for (int i = lo; i < ends[g]; ++i) s.push_back({OpKind::ForwardAll, i});
    for (int i = ends[g] - 1; i >= lo; --i) {
      if (i == lo && before)
        for (int j = g >= 2 ? ends[g - 2] : 0; j < lo; ++j) s.push_back({OpKind::ForwardAll, j});
      s.push_back({OpKind::Backward, i});
    }
  }
  return s;
}

Schedule memoryPoorSchedule(std::span<const Stage> stages, int segments) {
  const int n = static_cast<int>(stages.size());
  if (segments >= n) return memoryPoorSchedule(n);
  std::vector<int> ends = groupStages(stages, segments);
  Schedule s;
  for (size_t g = ends.size(); g-- > 0;) {
    const int lo = g == 0 ? 0 : ends[g - 1];
    for (int i = 0; i < lo; ++i) s.push_back({i + 1 == lo ? OpKind::ForwardCheckpoint : OpKind::ForwardTransient, i});
    for (int i = lo; i < ends[g]; ++i) s.push_back({OpKind::ForwardAll, i});
    for (int i = ends[g] - 1; i >= lo; --i) s.push_back({OpKind::Backward, i});
  }
  return s;
}

Schedule prefixMemoryPoorSchedule(int n, int prefix, bool keepEnd, int split, int alternate) {
  Schedule s;
  if (split <= 0 || split >= prefix) split = 0;
  // Stage t >= prefix recomputed once (alternate > 0): every other one from prefix + alternate
  // - 1 on, never the last.
  auto once = [&](int t) { return alternate > 0 && t + 1 < n && t >= prefix + alternate - 1 && (t - prefix - alternate + 1) % 2 == 0; };
  // Stages from..upTo-1 again (from the chain input, or from the checkpoint before `from`),
  // keeping only the latest boundary.
  auto rerun = [&](int from, int upTo) {
    for (int i = from; i < upTo; ++i) s.push_back({i + 1 == upTo ? OpKind::ForwardCheckpoint : OpKind::ForwardTransient, i});
  };
  for (int i = 0; i < n; ++i)
    s.push_back({i >= prefix && once(i)                           ? OpKind::ForwardTransient
                 : i >= prefix                                    ? OpKind::ForwardAll
                 : (i + 1 == prefix && keepEnd) || i + 1 == split ? OpKind::ForwardCheckpoint
                                                                  : OpKind::ForwardTransient,
                 i});
  for (int t = n - 1; t >= prefix; --t) {
    // A stage recomputed once runs again in full just before the stage after it (stored) needs
    // its boundary, from the stored stage (or the prefix's end) before it.
    if (t - 1 >= prefix && once(t - 1)) {
      if (t - 1 == prefix && !keepEnd) rerun(split, prefix);
      s.push_back({OpKind::ForwardAll, t - 1});
    }
    if (t == prefix && !keepEnd && !once(t)) rerun(split, prefix);
    s.push_back({OpKind::Backward, t});
  }
  for (int t = prefix - 1; t >= 0; --t) {
    rerun(t >= split ? split : 0, t);
    s.push_back({OpKind::ForwardAll, t});
    s.push_back({OpKind::Backward, t});
  }
  return s;
}

Schedule memoryPoorSchedule(int n) {
  Schedule s;
  for (int t = n - 1; t >= 0; --t) {
    for (int i = 0; i < t; ++i) s.push_back({i + 1 == t ? OpKind::ForwardCheckpoint : OpKind::ForwardTransient, i});
    s.push_back({OpKind::ForwardAll, t});
    s.push_back({OpKind::Backward, t});
  }
  return s;
}

// ---- the dynamic program -------------------------------------------------------------------------

Solver::Solver(std::vector<Stage> stages, std::int64_t unitBytes, int maxLevel, External external)
    : n_(static_cast<int>(stages.size())), unit_(std::max<std::int64_t>(1, unitBytes)), maxLevel_(std::max(0, maxLevel)),
      stages_(std::move(stages)) {
  externalSpec_ = external;
  external_ = roundDiv(external.bytes, unit_);
  const auto n = static_cast<size_t>(n_);
  const auto L = static_cast<size_t>(maxLevel_) + 1;
  S_.resize(n);
  X_.resize(n);
  B_.resize(n);
  prefixCost_.assign(n + 1, 0);
  prefixGrad_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    S_[i] = roundDiv(stages_[i].storedBytes, unit_);
    X_[i] = roundDiv(stages_[i].boundaryBytes, unit_);
    B_[i] = roundDiv(stages_[i].backwardBytes, unit_);
    prefixCost_[i + 1] = prefixCost_[i] + stages_[i].forwardCost;
    prefixGrad_[i + 1] = prefixGrad_[i] + stages_[i].gradientBytes;  // bytes; rounded per range
  }
  // Storing everything: every abar_i at the end of the first pass (E until its last reader),
  // then each backward with the abar of the stages before it, the gradients after it and its
  // temporaries.
  {
    std::int64_t stored = 0;
    storeAllLevel_ = 0;
    for (size_t i = 0; i < n; ++i) {
      stored += S_[i];
      storeAllLevel_ = std::max(storeAllLevel_, stored + (static_cast<int>(i) <= external.lastReader ? external_ : 0));
    }
    std::int64_t below = stored;
    for (int i = n_ - 1; i >= 0; --i) {
      storeAllLevel_ = std::max(storeAllLevel_, below + grads(i, n_ - 1) + B_[static_cast<size_t>(i)]);
      below -= S_[static_cast<size_t>(i)];
    }
  }
  opt_.assign(n * (n + 1) / 2 * L, kInf);
  // The smallest feasible level of each row: below it the row is all kInf, so the loops below
  // start there (Opt is non-increasing in m, infeasible exactly below that level).
  std::vector<size_t> feasibleFrom(n * (n + 1) / 2, L);

  for (int len = 0; len < n_; ++len) {
    for (int s = 0; s + len < n_; ++s) {
      const int t = s + len;
      std::int64_t* best = &opt_[row(s, t) * L];
      const auto us = static_cast<size_t>(s);
      // Option 1: store abar_s; its backward holds abar_s and the subproblem's gradients.
      const std::int64_t fs = stages_[us].forwardCost;
      const std::int64_t* rest = len == 0 ? nullptr : &opt_[row(s + 1, t) * L];
      const std::int64_t need = S_[us] + grads(s, t) + B_[us];
      size_t from = static_cast<size_t>(std::min<std::int64_t>(need, maxLevel_ + 1));
      if (rest) from = std::max(from, std::min(L, feasibleFrom[row(s + 1, t)] + static_cast<size_t>(S_[us])));
      for (size_t m = from; m < L; ++m) best[m] = fs + (rest ? rest[m - static_cast<size_t>(S_[us])] : 0);
      // Option 2: checkpoint a_{k-1}.
      std::int64_t sweep = X_[us];  // largest transient footprint of the sweep s..k-1
      for (int k = s + 1; k <= t; ++k) {
        const auto uk = static_cast<size_t>(k);
        if (k - 1 > s) sweep = std::max(sweep, X_[uk - 2] + X_[uk - 1]);
        if (sweep > maxLevel_) break;
        const std::int64_t forward = prefixCost_[uk] - prefixCost_[us];
        const std::int64_t* after = &opt_[row(k, t) * L];
        const std::int64_t* before = &opt_[row(s, k - 1) * L];
        const auto xk = static_cast<size_t>(X_[uk - 1]);
        const auto gk = static_cast<size_t>(grads(k, t));  // left by the first subproblem
        // Branch-free: an infeasible part is >= kInf, so its sum never beats best[m] (<= kInf
        // or a real cost), and three parts of at most kInf = max/8 cannot overflow. Which
        // option won is recovered by emit(), not stored.
        size_t from = static_cast<size_t>(std::max<std::int64_t>(sweep, static_cast<std::int64_t>(gk)));
        from = std::max({from, feasibleFrom[row(k, t)] + xk, feasibleFrom[row(s, k - 1)] + gk});
        for (size_t m = from; m < L; ++m) best[m] = std::min(best[m], forward + after[m - xk] + before[m - gk]);
      }
      size_t first = 0;
      while (first < L && best[first] >= kInf) ++first;
      for (size_t m = first; m < L; ++m) best[m] = std::min(best[m], kInf);  // one infeasible value
      feasibleFrom[row(s, t)] = first;
    }
  }
}

std::int64_t Solver::grads(int a, int b) const {
  return roundDiv(prefixGrad_[static_cast<size_t>(b) + 1] - prefixGrad_[static_cast<size_t>(a)], unit_);
}

size_t Solver::row(int s, int t) const {
  // Rows of the upper triangle, s major: row(s, t) = sum_{r<s} (n - r) + (t - s).
  const auto us = static_cast<size_t>(s), n = static_cast<size_t>(n_);
  return us * n - us * (us - 1) / 2 + static_cast<size_t>(t - s);  // us = 0: 0 * (0 - 1) wraps to 0
}

std::optional<std::int64_t> Solver::cost(int level) const {
  if (n_ == 0) return std::int64_t{0};
  if (level < 0) return std::nullopt;
  if (level >= storeAllLevel_) return prefixCost_.back();  // nothing is cheaper than no recompute
  const std::int64_t m = std::min<std::int64_t>(level, maxLevel_) - external_;
  if (m < 0) return std::nullopt;
  std::int64_t c = opt_[row(0, n_ - 1) * (static_cast<size_t>(maxLevel_) + 1) + static_cast<size_t>(m)];
  if (c >= kInf) return std::nullopt;
  return c;
}

// Recovers the option the table chose at (s, t, m), in the order the recurrence tries them
// (store first, then checkpoints k = s+1, ...), and emits it.
void Solver::emit(int s, int t, int m, Schedule& out) const {
  const size_t L = static_cast<size_t>(maxLevel_) + 1;
  const auto us = static_cast<size_t>(s);
  const auto um = static_cast<size_t>(m);
  const std::int64_t target = opt_[row(s, t) * L + um];
  assert(target < kInf);
  // Option 1.
  if (m >= S_[us] + grads(s, t) + B_[us]) {
    const std::int64_t rest = s == t ? 0 : opt_[row(s + 1, t) * L + um - static_cast<size_t>(S_[us])];
    if (rest < kInf && stages_[us].forwardCost + rest == target) {
      out.push_back({OpKind::ForwardAll, s});
      if (s < t) emit(s + 1, t, m - static_cast<int>(S_[us]), out);
      out.push_back({OpKind::Backward, s});
      return;
    }
  }
  // Option 2.
  std::int64_t sweep = X_[us];
  for (int k = s + 1; k <= t; ++k) {
    const auto uk = static_cast<size_t>(k);
    if (k - 1 > s) sweep = std::max(sweep, X_[uk - 2] + X_[uk - 1]);
    if (sweep > m) break;
    const std::int64_t gk = grads(k, t);
    if (m < gk) continue;
    const std::int64_t after = opt_[row(k, t) * L + um - static_cast<size_t>(X_[uk - 1])];
    const std::int64_t before = opt_[row(s, k - 1) * L + um - static_cast<size_t>(gk)];
    if (after >= kInf || before >= kInf || prefixCost_[uk] - prefixCost_[us] + after + before != target) continue;
    for (int j = s; j < k; ++j) out.push_back({j + 1 == k ? OpKind::ForwardCheckpoint : OpKind::ForwardTransient, j});
    emit(k, t, m - static_cast<int>(X_[uk - 1]), out);
    emit(s, k - 1, m - static_cast<int>(gk), out);
    return;
  }
  assert(false && "no option reproduces the table entry");
}

Schedule Solver::schedule(int level) const {
  Schedule out;
  if (n_ == 0) return out;
  assert(cost(level).has_value());
  if (level >= storeAllLevel_) return storeAllSchedule(n_);
  emit(0, n_ - 1, static_cast<int>(std::min<std::int64_t>(level, maxLevel_) - external_), out);
  return out;
}

std::vector<int> Solver::frontier() const {
  std::vector<int> levels;
  std::int64_t previous = kInf;
  const int top = static_cast<int>(std::max<std::int64_t>(maxLevel_, storeAllLevel_));
  for (int m = 0; m <= top; ++m) {
    std::optional<std::int64_t> c = cost(m);
    if (c && *c < previous) {
      levels.push_back(m);
      previous = *c;
    }
  }
  return levels;
}

Solver solveChain(std::vector<Stage> stages, int levels, External external) {
  std::int64_t total = external.bytes;
  std::int64_t temporaries = 0;
  for (const Stage& s : stages) {
    total += s.storedBytes + s.gradientBytes;
    temporaries = std::max(temporaries, s.backwardBytes);
  }
  total += temporaries;
  levels = std::max(levels, 1);
  const std::int64_t unit = std::max<std::int64_t>(1, ceilDiv(total, levels));
  // Rounding moves each stage by at most two units: storing everything always fits.
  const int maxLevel = levels + 4 * static_cast<int>(stages.size()) + 4;
  return Solver(std::move(stages), unit, maxLevel, external);
}

// ---- grouping ------------------------------------------------------------------------------------

std::vector<int> groupStages(std::span<const Stage> stages, int maxStages) {
  const int n = static_cast<int>(stages.size());
  std::vector<int> ends;
  if (n == 0) return ends;
  if (maxStages <= 1) return {n};
  if (n <= maxStages) {
    for (int i = 1; i <= n; ++i) ends.push_back(i);
    return ends;
  }
  // Weight: stored bytes (every stage at least 1, so empty stages still spread out).
  std::vector<long double> cum(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    cum[static_cast<size_t>(i) + 1] =
        cum[static_cast<size_t>(i)] + static_cast<long double>(std::max<std::int64_t>(1, stages[static_cast<size_t>(i)].storedBytes));
  const long double total = cum.back();
  const int groups = maxStages;
  const int window = std::max(0, n / groups / 3);
  int previous = 0;  // end of the previous group
  for (int g = 1; g < groups; ++g) {
    const long double target = total * g / groups;
    // The ideal end: the first e with cum[e] >= target.
    int ideal = static_cast<int>(std::lower_bound(cum.begin(), cum.end(), target) - cum.begin());
    const int lo = std::max(previous + 1, ideal - window);
    const int hi = std::min(n - (groups - g), ideal + window);
    if (lo > hi) {
      int e = std::clamp(ideal, previous + 1, n - (groups - g));
      ends.push_back(e);
      previous = e;
      continue;
    }
    int bestEnd = std::clamp(ideal, lo, hi);
    for (int e = lo; e <= hi; ++e) {
      const std::int64_t x = stages[static_cast<size_t>(e) - 1].boundaryBytes;
      const std::int64_t bx = stages[static_cast<size_t>(bestEnd) - 1].boundaryBytes;
      if (x < bx || (x == bx && std::abs(e - ideal) < std::abs(bestEnd - ideal))) bestEnd = e;
    }
    ends.push_back(bestEnd);
    previous = bestEnd;
  }
  ends.push_back(n);
  return ends;
}

}  // namespace gradc::passes::chain
