// The abstract chain behind the remat strategies: stages with heterogeneous compute and
// memory costs, schedules of forward/backward operations over them, an exact simulator, and
// the optimal dynamic program (the `chain` strategy). Nothing here knows about ir::Graph;
// passes/remat_strategies.cpp maps a graph onto a chain and a schedule back onto the graph.
//
// Model. Stages 0..n-1 run in order; stage i reads a_{i-1} (its input boundary; a_{-1} is the
// chain's input, always available) and produces a_i. Per stage:
//   forwardCost   f_i  FLOPs of one forward execution;
//   boundaryBytes x_i  size of a_i;
//   storedBytes   s_i  size of abar_i, everything the backward of stage i needs from it,
//                      a_i included (s_i >= x_i);
//   gradientBytes g_i  what the backward of stage i leaves alive until the end of the
//                      backward (parameter gradients, accumulated input gradients);
//   backwardBytes b_i  what the backward of stage i needs only while it runs (its largest
//                      short-lived gradient plus kernel workspace).
// And per chain, External E: buffers made before the chain that its stages read (an LSTM's
// input projection, read one time step at a time).
// Memory holds boundaries (a transient one is freed by the next forward, a checkpoint by the
// backward that reads it) and full activations abar_i. Operations:
//   ForwardTransient(i), ForwardCheckpoint(i): need a_{i-1}; store a_i.
//   ForwardAll(i): needs a_{i-1} held (a checkpoint, inside abar_{i-1}, or the chain input);
//                  stores abar_i.
//   Backward(i):   stages are back-propagated n-1, ..., 0; needs abar_i and a_{i-1}; holds
//                  g_i + b_i beside them, then frees abar_i, b_i and the boundary a_{i-1}
//                  (its last use); g_i stays.
// a_{i-1} is available when stored as a boundary or inside abar_{i-1}. Schedules are
// persistent (as in rotor): nothing is dropped before its last use, and the input of a full
// forward stays until that stage's backward, which needs it. E is held to the end by a
// schedule that recomputes (slightly pessimistic: it dies after the last recompute); one that
// does not (it stores everything) frees it once the first pass moves past E.lastReader, the
// last stage reading it. The peak is the largest total held right after a forward (before a
// consumed transient is freed) or during a backward; the cost is the FLOPs of every forward,
// the first pass included, so the recompute cost is cost - sum(f).
//
// The dynamic program (Beaumont et al., "Optimal checkpointing for heterogeneous chains",
// 2019: the rotor / Revolve family). Opt(s, t, m) = least cost to back-propagate stages s..t
// with a_{s-1} available (held by the caller) and m memory units for everything else:
//   option 1 (store):      f_s + Opt(s+1, t, m - S_s), then Backward(s);
//                          needs S_s + G(s..t) + B_s <= m (Backward(s) holds abar_s, its
//                          temporaries and every gradient of the subproblem)
//   option 2 (checkpoint): for k in s+1..t, run stages s..k-1 keeping only a_{k-1}:
//                          sum(f_s..f_{k-1}) + Opt(k, t, m - X_{k-1}) + Opt(s, k-1, m - G(k..t));
//                          needs the sweep's transient pairs to fit: X_s, X_{j-1} + X_j <= m
// with G(a..b) = g_a + ... + g_b. Every recomputing schedule holds E throughout, so
//   cost(m) = min(sum(f) if storing everything fits m, Opt(0, n-1, m - E)).
// S, X, G, B and E are in memory units, rounded to the nearest unit (G of a range once, from
// exact byte sums). One table for all m = 0..L gives the optimum for every memory limit at
// once: the Pareto frontier of (peak, cost), which the remat pass turns into budget-
// independent proposals (what makes the chosen peak monotone in the budget). Which option won
// is not stored; schedule() recovers it from the table.
//
// Complexity: O(n^3 L / 6) time, O(n^2 L / 2) space (each row starts at its first feasible
// level). The remat pass groups longer chains into at most remat::kMaxSolverStages (64)
// stages (consecutive stages merged, cuts at small boundaries) and uses L ~ 1024 levels:
// about 0.07 s on two cores.
//
// Guarantee: with unit 1 the result is the exact optimum over every schedule simulate()
// accepts (tests/passes/remat_chain_test.cpp compares it with an exhaustive search of the
// simulator's states on hundreds of random chains). With larger units it is optimal for the
// rounded sizes, and a schedule's exact peak is within about half a unit per stored item of
// its level (rounding to the nearest unit rather than up keeps the errors of many small
// stages from adding up to a floor far above the true one; the remat pass measures every
// proposal on the graph anyway).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gradc::passes::chain {

// The external buffers E of the header comment.
struct External {
  std::int64_t bytes = 0;
  int lastReader = 0;
};

struct Stage {
  std::int64_t forwardCost = 0;
  std::int64_t boundaryBytes = 0;
  std::int64_t storedBytes = 0;
  std::int64_t gradientBytes = 0;
  std::int64_t backwardBytes = 0;
  friend bool operator==(const Stage&, const Stage&) = default;
};

enum class OpKind : std::uint8_t { ForwardTransient, ForwardCheckpoint, ForwardAll, Backward };

struct Op {
  OpKind kind;
  int stage;
  friend bool operator==(const Op&, const Op&) = default;
};
using Schedule = std::vector<Op>;

std::string toString(const Op& op);        // "F*3" (all), "Fc3" (checkpoint), "Ft3", "B3"
std::string toString(const Schedule& s);   // ops joined by ' '

struct Simulation {
  bool ok = false;
  std::string error;       // why the schedule is invalid
  std::int64_t cost = 0;   // FLOPs of every forward, first pass included
  std::int64_t peak = 0;   // bytes
};

// Runs a schedule on the model, checking every precondition.
Simulation simulate(std::span<const Stage> stages, const Schedule& schedule, External external = {});

std::int64_t totalForwardCost(std::span<const Stage> stages);

// Fixed schedules.
// Every abar_i kept from the first pass: no recompute.
Schedule storeAllSchedule(int n);
// Chen et al. 2016: about sqrt(n) segments of equal stored bytes; the first pass keeps each
// segment's end boundary and the whole last segment; each other segment is recomputed once,
// all at once, from its input boundary before its backward. One extra forward of all but the
// last segment; memory ~ sum of segment inputs + one segment.
// `segments` <= 0: round(sqrt(n)).
Schedule sqrtSchedule(std::span<const Stage> stages, int segments = 0);
// Segments [ends[g-1], ends[g]) (ends ascending, the last one n), each either recomputed or
// stored: the first pass keeps a recomputed segment's end boundary only and a stored segment's
// every abar; before the backward of a recomputed segment its stages run again in full from
// the boundary before it (a checkpoint, or the stored segment's). sqrtSchedule is the case
// "every segment recomputed but the last". keepEnd (empty: all kept) may say a recomputed
// segment followed by a stored one keeps not even its end boundary: it then runs again in
// full just before the stored segment's first backward, which reads that boundary.
Schedule segmentSchedule(std::span<const int> ends, std::span<const char> recomputed,
                         std::span<const char> keepEnd = {});
// Keep nothing but the chain input: before the backward of stage t, run stages 0..t-1 again
// keeping only the latest boundary, then stage t in full. Memory O(1) stages; cost O(n^2).
Schedule memoryPoorSchedule(int n);
// The same over segments (chain::groupStages of at most `segments`): before the backward of
// a segment, run every stage before it again keeping only the latest boundary, then the
// segment in full. Memory one segment; cost O(segments^2) segment forwards.
Schedule memoryPoorSchedule(std::span<const Stage> stages, int segments);
// Stages prefix..n-1 stored from the first pass; the first `prefix` stages memory-poor (before
// the backward of stage t < prefix, stages 0..t-1 run again keeping only the latest boundary,
// then stage t in full). keepEnd: the first pass keeps the prefix's end boundary (which the
// first stored stage's backward reads); otherwise it is recomputed the same way just before
// that backward.
// split in (0, prefix): the first pass also keeps the boundary of stage split - 1 (a
// checkpoint), and the stages split..prefix-1 are memory-poor from it, the stages before it
// from the chain input: two memory-poor runs instead of one, about split^2/2 + (prefix -
// split)^2/2 stage forwards instead of prefix^2/2, for one more boundary held. (What the exact
// optimum does on an 8-layer MLP's tightest budget: bench/remat_ilp.py.)
// alternate > 0: of the stages after the prefix, every other one from prefix + alternate - 1
// on (never the last) is recomputed once instead of stored: the first pass keeps not even its
// boundary, and it runs again in full, from the boundary before it, just before the backward
// of the stored stage after it (which reads that boundary). The model cannot express that
// (simulate() refuses it); the rewrite can.
Schedule prefixMemoryPoorSchedule(int n, int prefix, bool keepEnd, int split = 0, int alternate = 0);

// The optimal schedules for every memory level (see the header comment).
class Solver {
 public:
  // Memory is counted in units of unitBytes (>= 1); levels 0..maxLevel are solved.
  Solver(std::vector<Stage> stages, std::int64_t unitBytes, int maxLevel, External external = {});

  int numStages() const { return n_; }
  int maxLevel() const { return maxLevel_; }
  std::int64_t unitBytes() const { return unit_; }
  const External& external() const { return externalSpec_; }
  // Least cost within level * unitBytes bytes; nullopt when no schedule fits.
  std::optional<std::int64_t> cost(int level) const;
  // The schedule achieving cost(level); requires cost(level).
  Schedule schedule(int level) const;
  // Levels where the optimum strictly improves over every smaller level, smallest first.
  std::vector<int> frontier() const;

 private:
  size_t row(int s, int t) const;
  std::int64_t grads(int a, int b) const;  // G(a..b) in units
  void emit(int s, int t, int m, Schedule& out) const;

  int n_;
  std::int64_t unit_;
  int maxLevel_;
  std::vector<Stage> stages_;
  std::vector<std::int64_t> S_, X_, B_, prefixCost_, prefixGrad_;
  External externalSpec_;
  std::int64_t external_ = 0;      // E in units
  std::int64_t storeAllLevel_ = 0;  // the level storing everything needs
  std::vector<std::int64_t> opt_;  // [row(s,t)][m]; kInf where infeasible
};

// A solver with the unit chosen so that storing everything needs about `levels` units.
Solver solveChain(std::vector<Stage> stages, int levels = 1024, External external = {});

// Groups consecutive stages into at most maxStages groups of about equal stored bytes, each
// cut placed at a small boundary near its ideal position. Returns each group's end (one past
// its last stage), increasing, the last equal to stages.size().
std::vector<int> groupStages(std::span<const Stage> stages, int maxStages);

}  // namespace gradc::passes::chain
