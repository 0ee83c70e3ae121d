// Memory plan: the overlap verifier against brute force on random interval sets (both
// placements), corrupted plans are caught, random graphs plan without overlap and with a
// timeline that the buffers add up to, strided-operand copies and view aliasing on small
// graphs, and the bundled models' fragmentation.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/bundled_model.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/memory/liveness.h"
#include "passes/memory/memory_plan.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "tests/ir/test_util.h"

using namespace gradc;
using passes::Interval;
using passes::MemoryPlan;

namespace {

// A plan holding just these intervals at these offsets.
MemoryPlan planOf(const std::vector<Interval>& intervals, const std::vector<std::int64_t>& offsets, std::int64_t arena,
                  int steps) {
  MemoryPlan plan;
  plan.arenaBytes = arena;
  plan.timeline.assign(static_cast<size_t>(std::max(steps, 1)), 0);
  for (size_t i = 0; i < intervals.size(); ++i) {
    passes::PlannedBuffer b;
    b.name = "b" + std::to_string(i);
    b.size = intervals[i].size;
    b.offset = offsets[i];
    b.firstStep = intervals[i].first < 0 ? 0 : intervals[i].first;
    b.lastStep = intervals[i].first < 0 ? steps - 1 : intervals[i].last;
    plan.buffers.push_back(b);
  }
  return plan;
}

// Quadratic reference: true when two buffers alive at a common step share a byte.
bool bruteForceOverlap(const MemoryPlan& plan) {
  const auto& b = plan.buffers;
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = i + 1; j < b.size(); ++j) {
      if (b[i].size == 0 || b[j].size == 0) continue;
      bool time = b[i].firstStep <= b[j].lastStep && b[j].firstStep <= b[i].lastStep;
      bool space = b[i].offset < b[j].offset + b[j].size && b[j].offset < b[i].offset + b[i].size;
      if (time && space) return true;
    }
  return false;
}

// Most bytes alive at one step: a lower bound of any arena.
std::int64_t maxLive(const MemoryPlan& plan, int steps) {
  std::int64_t best = 0;
  for (int s = 0; s < steps; ++s) {
    std::int64_t live = 0;
    for (const auto& b : plan.buffers)
      if (b.firstStep <= s && s <= b.lastStep) live += b.size;
    best = std::max(best, live);
  }
  return best;
}

std::vector<Interval> randomIntervals(std::mt19937& rng, int steps) {
  std::uniform_int_distribution<int> count(1, 120), step(0, steps - 1), kind(0, 9);
  std::uniform_int_distribution<std::int64_t> size(1, 5000);
  std::vector<Interval> v(static_cast<size_t>(count(rng)));
  for (Interval& b : v) {
    int k = kind(rng);
    b.size = k == 0 ? 0 : k <= 2 ? size(rng) * 64 : size(rng);  // some empty, some large
    if (k == 9) {
      b.first = -1;  // persistent
      b.last = steps - 1;
      continue;
    }
    int a = step(rng), c = step(rng);
    b.first = std::min(a, c);
    b.last = std::max(a, c);
  }
  return v;
}

// Random type-correct graphs over a few shapes: elementwise ops, views (transpose, reshape,
// split), matmul, softmax (which copies strided operands), sum_to; random phases and outputs.
ir::Graph randomGraph(std::mt19937& rng) {
  ir::Graph g("random");
  std::vector<ir::Value*> values;
  values.push_back(g.addInput("x", {ir::DType::f32, {4, 8}}));
  values.push_back(g.addInput("y", {ir::DType::f32, {8, 4}}));
  values.push_back(g.addParam("w", {ir::DType::f32, {8, 8}}));
  std::uniform_int_distribution<int> nodes(1, 40), opPick(0, 9), phasePick(0, 3);
  const int n = nodes(rng);
  for (int i = 0; i < n; ++i) {
    std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
    ir::Value* a = values[pick(rng)];
    ir::Value* b = values[pick(rng)];
    const ir::Shape& sa = a->type().shape;
    constexpr std::array phases{ir::Phase::fwd, ir::Phase::bwd, ir::Phase::recompute, ir::Phase::opt};
    ir::Phase phase = phases[static_cast<size_t>(phasePick(rng))];
    Expected<ir::Node*> node = Error{"none"};
    switch (opPick(rng)) {
      case 0: node = g.create("relu", std::vector<ir::Value*>{a}, {}, phase); break;
      case 1: node = g.create("tanh", std::vector<ir::Value*>{a}, {}, phase); break;
      case 2: node = g.create("add", std::vector<ir::Value*>{a, b}, {}, phase); break;
      case 3:
        if (sa.size() >= 2)
          node = g.create("transpose", std::vector<ir::Value*>{a}, {{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}},
                          phase);
        break;
      case 4: {
        ir::Shape flat{a->type().numel() / 2, 2};
        node = g.create("reshape", std::vector<ir::Value*>{a}, {{"shape", flat}}, phase);
        break;
      }
      case 5:
        if (sa[0] % 2 == 0)
          node = g.create("split", std::vector<ir::Value*>{a}, {{"dim", std::int64_t{0}}, {"sections", std::int64_t{2}}},
                          phase);
        break;
      case 6: node = g.create("matmul", std::vector<ir::Value*>{a, b}, {}, phase); break;
      case 7: node = g.create("softmax", std::vector<ir::Value*>{a}, {{"dim", std::int64_t{-1}}}, phase); break;
      case 8: node = g.create("sum_to", std::vector<ir::Value*>{a}, {{"shape", ir::Shape{sa.back()}}}, phase); break;
      case 9: node = g.create("mul", std::vector<ir::Value*>{a, a}, {}, phase); break;
    }
    if (!node) continue;
    for (size_t r = 0; r < (*node)->numResults(); ++r) values.push_back((*node)->result(r));
  }
  std::uniform_int_distribution<int> coin(0, 3);
  int outputs = 0;
  for (size_t i = 3; i < values.size(); ++i)
    if (coin(rng) == 0 || i + 1 == values.size()) g.setOutput("o" + std::to_string(outputs++), values[i]);
  return g;
}

ir::Graph trainingGraph(const std::string& model, std::vector<std::pair<std::string, std::string>> sets) {
  ir::Graph g = testing::compileBundledModel(model, std::move(sets));
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>().add<passes::DeadCodeElimination>().add<passes::Schedule>();
  REQUIRE(pm.run(g).ok());
  return g;
}

// Sum of the plan's buffers alive at each step equals the timeline.
void checkTimeline(const MemoryPlan& plan) {
  std::vector<std::int64_t> sum(plan.timeline.size(), 0);
  for (const auto& b : plan.buffers)
    for (int s = b.firstStep; s <= b.lastStep; ++s) sum[static_cast<size_t>(s)] += b.size;
  CHECK(sum == plan.timeline);
  if (!plan.timeline.empty()) CHECK(plan.peakBytes == *std::max_element(plan.timeline.begin(), plan.timeline.end()));
  CHECK(plan.arenaBytes >= plan.peakBytes);
}

}  // namespace

TEST_CASE("both placements never overlap on random intervals; the verifier agrees with brute force") {
  std::mt19937 rng(20240611);
  double worst[2] = {1.0, 1.0};
  for (int trial = 0; trial < 3000; ++trial) {
    const int steps = 1 + trial % 60;
    std::vector<Interval> intervals = randomIntervals(rng, steps);
    using Place = std::int64_t (*)(const std::vector<Interval>&, std::vector<std::int64_t>&);
    int which = 0;
    for (Place place :
         {Place{passes::assignOffsetsBestFit}, Place{passes::assignOffsetsBySize}, Place{passes::assignOffsets}}) {
      std::vector<std::int64_t> offsets;
      std::int64_t arena = place(intervals, offsets);
      MemoryPlan plan = planOf(intervals, offsets, arena, steps);
      CAPTURE(trial);
      Status verified = passes::verifyNoOverlap(plan);
      CHECK_MESSAGE(verified.ok(), verified.message());
      CHECK_FALSE(bruteForceOverlap(plan));
      std::int64_t lower = maxLive(plan, steps);
      CHECK(arena >= lower);
      if (which < 2 && lower > 0) worst[which] = std::max(worst[which], static_cast<double>(arena) / lower);
      ++which;
    }
  }
  MESSAGE("worst fragmentation on random intervals: best-fit sweep " << worst[0] << ", greedy by size " << worst[1]);
}

TEST_CASE("the verifier catches overlapping buffers, and only those") {
  std::mt19937 rng(7);
  int caught = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int steps = 1 + trial % 40;
    std::vector<Interval> intervals = randomIntervals(rng, steps);
    std::vector<std::int64_t> offsets;
    std::int64_t arena = passes::assignOffsets(intervals, offsets);
    // Move one buffer onto another (shifted a little): an overlap exactly when both are alive
    // at a common step and non-empty.
    std::uniform_int_distribution<size_t> pick(0, intervals.size() - 1);
    size_t i = pick(rng), j = pick(rng);
    if (i == j || intervals[j].size < 2) continue;
    offsets[i] = offsets[j] + intervals[j].size / 2;
    arena = std::max(arena, offsets[i] + intervals[i].size);
    MemoryPlan plan = planOf(intervals, offsets, arena, steps);
    bool expected = bruteForceOverlap(plan);
    Status verified = passes::verifyNoOverlap(plan);
    CAPTURE(trial);
    CHECK(verified.ok() == !expected);
    if (!verified.ok()) {
      ++caught;
      CHECK(verified.message().find("buffers overlap") != std::string::npos);
    }
  }
  CHECK(caught > 100);

  MemoryPlan outside = planOf({{100, 0, 0}}, {50}, 100, 1);
  Status s = passes::verifyNoOverlap(outside);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("outside the arena") != std::string::npos);
}

TEST_CASE("random graphs: plans never overlap, the timeline is the sum of the buffers, peak = max(timeline)") {
  std::mt19937 rng(42);
  int planned = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    ir::Graph g = randomGraph(rng);
    if (g.numNodes() == 0) continue;
    CAPTURE(trial);
    MemoryPlan plan = passes::planMemory(g);
    Status verified = passes::verifyNoOverlap(plan);
    CHECK_MESSAGE(verified.ok(), verified.message());
    CHECK_FALSE(bruteForceOverlap(plan));
    checkTimeline(plan);
    CHECK(plan.peakBytes == passes::analyzeLiveness(g).peakBytes);
    // Scheduling never raises the peak of an input without recompute nodes (it may move a
    // recompute node that the input placed early -- here phases are random -- to its use).
    bool recompute = std::any_of(g.nodes().begin(), g.nodes().end(),
                                 [](const auto& n) { return n->phase() == ir::Phase::recompute; });
    std::int64_t before = plan.peakBytes;
    REQUIRE(passes::Schedule().run(g).ok());
    MemoryPlan scheduled = passes::planMemory(g);
    CHECK(passes::verifyNoOverlap(scheduled).ok());
    if (!recompute) CHECK(scheduled.peakBytes <= before);
    ++planned;
  }
  CHECK(planned > 1500);
}

TEST_CASE("views share their source's buffer; a reshape that cannot view copies; strided operands cost workspace") {
  ir::Graph g = testing::parseOrFail(R"(graph g
  input %x : f32[4, 6]
  %0 = tanh(%x) : f32[4, 6] fwd  # a
  %1 = transpose(%0) {dim0 = 0, dim1 = 1} : f32[6, 4] fwd  # t
  %2 = reshape(%1) {shape = [24]} : f32[24] fwd  # flat
  %3 = softmax(%1) {dim = 1} : f32[6, 4] fwd  # s
  %4 = reshape(%0) {shape = [2, 12]} : f32[2, 12] fwd  # view
  %5 = add(%4, %4) : f32[2, 12] fwd  # b
  output p = %2
  output q = %3
  output r = %5
)");
  passes::StorageModel storage = passes::analyzeStorage(g);
  const auto& nodes = g.nodes();
  auto result = [&](size_t i) { return nodes[i]->result(0); };
  CHECK(storage.owner(result(1)) == result(0));  // transpose: a view
  CHECK_FALSE(storage.contiguous(result(1)));
  CHECK(storage.owner(result(2)) == result(2));  // reshape of a transposed tensor: a copy
  CHECK(storage.contiguous(result(2)));
  CHECK(storage.owner(result(4)) == result(0));  // reshape of a contiguous tensor: a view
  CHECK(storage.copyBytes(nodes[3].get()) == 4 * 6 * 4);  // softmax copies its strided operand
  CHECK(storage.copyBytes(nodes[5].get()) == 0);           // add reads strides in place

  MemoryPlan plan = passes::planMemory(g);
  CHECK(passes::verifyNoOverlap(plan).ok());
  checkTimeline(plan);
  // Buffers: x, %0 (tanh, kept by views until the end), %2, %3, %5, and the softmax workspace.
  REQUIRE(plan.buffers.size() == 6);
  CHECK(plan.buffers[1].name == "%0");
  CHECK(plan.buffers[1].lastStep == 5);
  CHECK(plan.buffers.back().kind == ir::BufferKind::Workspace);
  CHECK(plan.buffers.back().name == "workspace(%3)");
  CHECK(plan.buffers.back().firstStep == 3);
}

TEST_CASE("view strides follow ATen's rule") {
  using S = std::vector<std::int64_t>;
  // [B, T, H, D] transposed to [B, H, T, D] cannot merge (B, H): a copy, as in attention.
  CHECK_FALSE(passes::viewStrides({2, 4, 3, 5}, {60, 5, 20, 1}, {8, 3, 5}).has_value());
  // A split along the last dim reshaped to heads: a view.
  CHECK(passes::viewStrides({2, 3, 8}, {72, 24, 1}, {2, 3, 2, 4}) == S{72, 24, 4, 1});
  // Contiguous: any shape.
  CHECK(passes::viewStrides({2, 3, 4}, {12, 4, 1}, {6, 4}) == S{4, 1});
  CHECK(passes::viewStrides({2, 3, 4}, {12, 4, 1}, {24}) == S{1});
  // Transposed matrix flattened: no view.
  CHECK_FALSE(passes::viewStrides({3, 4}, {1, 3}, {12}).has_value());
  CHECK(passes::contiguousStrides({2, 3, 4}) == S{12, 4, 1});
}

TEST_CASE("bundled models: plans verify, fragmentation is reported and small") {
  for (auto [model, sets] : {std::pair<std::string, std::vector<std::pair<std::string, std::string>>>{"gpt-mini", {}},
                             {"lstm-lm", {}},
                             {"mlp", {}},
                             {"lm-seed", {{"layers", "2"}}}}) {
    CAPTURE(model);
    ir::Graph g = trainingGraph(model, sets);
    MemoryPlan plan = passes::planMemory(g);
    Status verified = passes::verifyNoOverlap(plan);
    CHECK_MESSAGE(verified.ok(), verified.message());
    checkTimeline(plan);
    MESSAGE(model << ": peak " << plan.peakBytes << ", arena " << plan.arenaBytes << ", fragmentation "
                  << plan.fragmentation() << ", " << plan.buffers.size() << " buffers");
    CHECK(plan.fragmentation() < 1.05);
    // What is live at the peak adds up to the peak.
    std::int64_t live = 0;
    for (size_t i : plan.liveAt(plan.peakStep)) live += plan.buffers[i].size;
    CHECK(live == plan.peakBytes);
    CHECK(plan.forwardFlops > 0);
    CHECK(plan.recomputeFlops == 0);
    REQUIRE(plan.ranks.size() == 1);
    CHECK(plan.ranks[0].peakBytes == plan.peakBytes);
  }
}
