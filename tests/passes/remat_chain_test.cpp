// The chain dynamic program against an exhaustive search, on hundreds of small random chains.
//
// The exhaustive search knows nothing of the recurrence: it is a shortest-path search over
// every memory state (which boundaries a_i and which full activations abar_i are held, and
// how many stages are back-propagated), with every forward, every discard and the next
// backward as moves, under the same memory rules as chain::simulate. The dynamic program
// must find the same least cost for every memory limit, and its schedule must replay on the
// simulator at that cost, within that limit.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <random>
#include <vector>

#include "passes/remat_chain.h"

using namespace gradc::passes;
using chain::OpKind;
using chain::Stage;

namespace {

// Least total forward cost of back-propagating the chain within `limit` bytes over every
// schedule chain::simulate accepts; nullopt if none. A shortest-path search: a state is what
// memory holds (each boundary none / transient / checkpoint, each abar_i or not) and how many
// stages are back-propagated; a move is any forward the rules allow, or the next backward.
// Schedules that recompute (some forward after the first backward) hold the external
// buffers throughout; the others free them once a stage after external.lastReader runs, or at
// the first backward: the two families are searched separately.
std::optional<std::int64_t> searchFamily(const std::vector<Stage>& stages, std::int64_t limit, chain::External external,
                                         bool recomputing) {
  const int n = static_cast<int>(stages.size());
  constexpr int None = 0, Transient = 1, Checkpoint = 2;
  struct State {
    int next;                  // next stage to back-propagate; -1 when done
    std::uint32_t full;        // bit i: abar_i held
    std::vector<int> boundary; // per stage: None / Transient / Checkpoint
    int externalHeld = 1;
  };
  size_t pow3 = 1;
  for (int i = 0; i < n; ++i) pow3 *= 3;
  auto encode = [&](const State& s) {
    size_t code = 0;
    for (int i = n - 1; i >= 0; --i) code = code * 3 + static_cast<size_t>(s.boundary[static_cast<size_t>(i)]);
    return ((static_cast<size_t>(s.next + 1) * (size_t{1} << n) + s.full) * pow3 + code) * 2 +
           static_cast<size_t>(s.externalHeld);
  };
  auto decode = [&](size_t code) {
    State s;
    s.externalHeld = static_cast<int>(code % 2);
    code /= 2;
    s.boundary.resize(static_cast<size_t>(n));
    size_t b = code % pow3;
    for (int i = 0; i < n; ++i) {
      s.boundary[static_cast<size_t>(i)] = static_cast<int>(b % 3);
      b /= 3;
    }
    code /= pow3;
    s.full = static_cast<std::uint32_t>(code % (size_t{1} << n));
    s.next = static_cast<int>(code / (size_t{1} << n)) - 1;
    return s;
  };
  auto memory = [&](const State& s) {
    std::int64_t m = s.externalHeld ? external.bytes : 0;
    for (int i = s.next + 1; i < n; ++i) m += stages[static_cast<size_t>(i)].gradientBytes;  // left by backwards
    for (int i = 0; i < n; ++i) {
      if (s.full >> i & 1) m += stages[static_cast<size_t>(i)].storedBytes;
      if (s.boundary[static_cast<size_t>(i)] != None) m += stages[static_cast<size_t>(i)].boundaryBytes;
    }
    return m;
  };
  const size_t states = static_cast<size_t>(n + 1) * (size_t{1} << n) * pow3 * 2;
  constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> dist(states, kInf);
  using Item = std::pair<std::int64_t, size_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  auto push = [&](std::int64_t d, const State& s) {
    const size_t code = encode(s);
    if (d < dist[code]) {
      dist[code] = d;
      queue.push({d, code});
    }
  };
  push(0, State{n - 1, 0, std::vector<int>(static_cast<size_t>(n), None), 1});
  while (!queue.empty()) {
    auto [d, code] = queue.top();
    queue.pop();
    if (d != dist[code]) continue;
    const State s = decode(code);
    if (s.next < 0) return d;
    auto heldFull = [&](int i) { return i >= 0 && (s.full >> i & 1); };
    auto held = [&](int i) { return i < 0 || s.boundary[static_cast<size_t>(i)] != None || heldFull(i); };
    const bool mayForward = recomputing || s.next == n - 1;
    for (int i = 0; i <= s.next && mayForward; ++i) {
      if (!held(i - 1)) continue;
      const auto ui = static_cast<size_t>(i);
      const Stage& st = stages[ui];
      for (int kind : {Transient, Checkpoint, Checkpoint + 1}) {  // the last one: ForwardAll
        State t = s;
        if (!recomputing && i > external.lastReader) t.externalHeld = 0;
        if (kind == Checkpoint + 1) {
          // A full forward reads a held input: a checkpoint, abar_{i-1} or the chain input.
          if (heldFull(i) || (i > 0 && s.boundary[ui - 1] == Transient && !heldFull(i - 1))) continue;
          t.full |= 1u << i;
        } else {
          if (s.boundary[ui] != None) continue;
          t.boundary[ui] = kind;
        }
        if (memory(t) > limit) continue;
        if (i > 0 && t.boundary[ui - 1] == Transient) t.boundary[ui - 1] = None;
        push(d + st.forwardCost, t);
      }
    }
    // A backward holds its stage's activations, its input, its new gradients and its
    // temporaries at once.
    if (heldFull(s.next) && held(s.next - 1)) {
      const Stage& st = stages[static_cast<size_t>(s.next)];
      State t = s;
      if (!recomputing) t.externalHeld = 0;
      if (memory(t) + st.gradientBytes + st.backwardBytes <= limit) {
        t.full &= ~(1u << s.next);
        if (s.next > 0) t.boundary[static_cast<size_t>(s.next) - 1] = None;
        --t.next;
        push(d, t);
      }
    }
  }
  return std::nullopt;
}

std::optional<std::int64_t> exhaustiveOptimum(const std::vector<Stage>& stages, std::int64_t limit,
                                              chain::External external) {
  std::optional<std::int64_t> a = searchFamily(stages, limit, external, false);
  std::optional<std::int64_t> b = searchFamily(stages, limit, external, true);
  if (a && b) return std::min(*a, *b);
  return a ? a : b;
}

std::vector<Stage> randomChain(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> cost(1, 9), boundary(1, 4), extra(0, 5), gradient(0, 3);
  std::vector<Stage> stages;
  for (int i = 0; i < n; ++i) {
    Stage s;
    s.forwardCost = cost(rng);
    s.boundaryBytes = boundary(rng);
    s.storedBytes = s.boundaryBytes + extra(rng);
    s.gradientBytes = gradient(rng);
    s.backwardBytes = gradient(rng);
    stages.push_back(s);
  }
  return stages;
}

std::int64_t storedTotal(const std::vector<Stage>& stages) {
  std::int64_t total = 0;
  for (const Stage& s : stages) total += s.storedBytes + s.gradientBytes + s.backwardBytes;
  return total;
}

}  // namespace

TEST_CASE("chain DP equals the exhaustive optimum on random chains") {
  int feasible = 0, infeasible = 0, withRecompute = 0;
  for (std::uint32_t seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);
    const int n = 1 + static_cast<int>(seed % 5);
    std::vector<Stage> stages = randomChain(rng, n);
    chain::External external;
    if (seed % 3 != 0) {
      external.bytes = static_cast<std::int64_t>(rng() % 5);
      external.lastReader = static_cast<int>(rng() % static_cast<unsigned>(n));
    }
    const std::int64_t total = storedTotal(stages) + external.bytes;
    const chain::Solver solver(stages, 1, static_cast<int>(total) + 2, external);
    const std::int64_t forward = chain::totalForwardCost(stages);
    // Every limit from nothing to more than storing everything needs.
    for (std::int64_t limit = 0; limit <= total + 1; ++limit) {
      CAPTURE(seed);
      CAPTURE(limit);
      std::optional<std::int64_t> expected = exhaustiveOptimum(stages, limit, external);
      std::optional<std::int64_t> got = solver.cost(static_cast<int>(limit));
      REQUIRE(got.has_value() == expected.has_value());
      if (!got) {
        ++infeasible;
        continue;
      }
      ++feasible;
      CHECK(*got == *expected);
      if (*got > forward) ++withRecompute;
      chain::Schedule schedule = solver.schedule(static_cast<int>(limit));
      chain::Simulation sim = chain::simulate(stages, schedule, external);
      CAPTURE(chain::toString(schedule));
      REQUIRE_MESSAGE(sim.ok, sim.error);
      CHECK(sim.cost == *got);
      CHECK(sim.peak <= limit);
    }
  }
  MESSAGE(feasible << " feasible and " << infeasible << " infeasible (chain, limit) cases; " << withRecompute
                    << " of the feasible ones need recomputation");
  CHECK(withRecompute > 100);  // the cases exercise recomputation, not only storing everything
}

TEST_CASE("chain DP with larger memory units: valid schedules near each level, a strict frontier") {
  std::mt19937 rng(7);
  std::vector<Stage> stages;
  std::uniform_int_distribution<std::int64_t> bytes(1000, 90000), cost(100, 100000);
  for (int i = 0; i < 40; ++i) {
    Stage s;
    s.forwardCost = cost(rng);
    s.boundaryBytes = bytes(rng) / 4;
    s.storedBytes = s.boundaryBytes + bytes(rng);
    stages.push_back(s);
  }
  const chain::Solver solver = chain::solveChain(stages, 256);
  std::vector<int> levels = solver.frontier();
  REQUIRE(levels.size() > 5);
  std::int64_t previousCost = std::numeric_limits<std::int64_t>::max();
  for (int level : levels) {
    chain::Simulation sim = chain::simulate(stages, solver.schedule(level));
    REQUIRE_MESSAGE(sim.ok, sim.error);
    CHECK(sim.cost == *solver.cost(level));
    // Rounding to the nearest unit: within half a unit per stage of the level.
    CHECK(sim.peak <= (static_cast<std::int64_t>(level) + 40) * solver.unitBytes());
    CHECK(sim.cost < previousCost);  // the frontier strictly improves
    previousCost = sim.cost;
  }
  // The top of the frontier recomputes nothing.
  CHECK(*solver.cost(levels.back()) == chain::totalForwardCost(stages));
}

TEST_CASE("fixed schedules: store-all, sqrt and memory-poor replay with their known costs") {
  std::vector<Stage> stages(16, Stage{10, 4, 20});
  const std::int64_t forward = chain::totalForwardCost(stages);

  chain::Simulation all = chain::simulate(stages, chain::storeAllSchedule(16));
  REQUIRE(all.ok);
  CHECK(all.cost == forward);
  CHECK(all.peak == 16 * 20);

  // sqrt: 4 segments of 4; the first 3 are recomputed once; memory = 3 checkpoints + one
  // segment of full activations (the last, or one being recomputed plus checkpoints before it).
  chain::Simulation sq = chain::simulate(stages, chain::sqrtSchedule(stages));
  REQUIRE_MESSAGE(sq.ok, sq.error);
  CHECK(sq.cost == forward + 12 * 10);
  CHECK(sq.peak == 3 * 4 + 4 * 20);

  // memory-poor: stage t is reached again from the input before its backward: sum_t t forwards.
  chain::Simulation poor = chain::simulate(stages, chain::memoryPoorSchedule(16));
  REQUIRE_MESSAGE(poor.ok, poor.error);
  CHECK(poor.cost == forward + 10 * (15 * 16 / 2));
  CHECK(poor.peak == 4 + 20);  // a checkpoint and one stage (a transient pair is 8 < 24)

  // Over 4 segments of 4 stages: the segment before the last is reached with 8 forwards, ...
  chain::Simulation seg = chain::simulate(stages, chain::memoryPoorSchedule(stages, 4));
  REQUIRE_MESSAGE(seg.ok, seg.error);
  CHECK(seg.cost == forward + 10 * (12 + 8 + 4));
  CHECK(seg.peak == 4 + 4 * 20);

  // The simulator rejects what breaks the rules.
  chain::Schedule bad = chain::storeAllSchedule(3);
  std::swap(bad[3], bad[4]);  // B1 before B2
  CHECK_FALSE(chain::simulate(std::vector<Stage>(3, Stage{1, 1, 2}), bad).ok);
  chain::Schedule missing = {{OpKind::ForwardTransient, 0}, {OpKind::ForwardAll, 1}, {OpKind::Backward, 1}};
  CHECK_FALSE(chain::simulate(std::vector<Stage>(2, Stage{1, 1, 2}), missing).ok);  // a_0 was freed
}

TEST_CASE("grouping keeps every stage, in order, and at most the requested number of groups") {
  std::mt19937 rng(3);
  for (int n : {1, 5, 64, 65, 300, 1000}) {
    std::vector<Stage> stages = randomChain(rng, n);
    std::vector<int> ends = chain::groupStages(stages, 64);
    CAPTURE(n);
    REQUIRE(!ends.empty());
    CHECK(static_cast<int>(ends.size()) <= 64);
    CHECK(ends.back() == n);
    for (size_t i = 1; i < ends.size(); ++i) CHECK(ends[i] > ends[i - 1]);
    CHECK(ends.front() > 0);
  }
}
