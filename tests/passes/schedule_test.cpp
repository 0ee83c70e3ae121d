// Schedule: text in, text out on small graphs (a node that frees memory runs first, recompute
// sinks to its first use unless running it earlier frees its temporaries before an
// independent allocation, an update stays after every reader of its parameter); invariants on
// every bundled model (topological, verified, updates last, recompute adjacent to its first
// use, peak no higher than the input order's, deterministic); speed on 1,000-block chains.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/spec.h"
#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/memory/liveness.h"
#include "passes/optimizer.h"
#include "passes/pass_manager.h"
#include "passes/schedule.h"
#include "tests/ir/test_util.h"

using namespace gradc;

namespace {

std::string runSchedule(const std::string& text, bool expectChange) {
  ir::Graph g = testing::parseOrFail(text);
  passes::Schedule schedule;
  Expected<bool> changed = schedule.run(g);
  REQUIRE(changed.ok());
  CHECK(*changed == expectChange);
  Status verified = ir::verify(g);
  if (!verified) FAIL(verified.message());
  return ir::printGraph(g);
}

std::vector<std::filesystem::path> bundledModels() {
  std::vector<std::filesystem::path> specs;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(GRADC_SOURCE_DIR) / "models"))
    if (entry.path().extension() == ".yaml") specs.push_back(entry.path());
  std::sort(specs.begin(), specs.end());
  return specs;
}

// The training graph of a spec (autodiff, optimizer, dce), not yet scheduled.
ir::Graph trainingGraph(const std::filesystem::path& spec, std::vector<std::pair<std::string, std::string>> sets = {},
                        passes::OptimizerOptions opt = {}) {
  frontend::SpecOptions options;
  options.overrides = std::move(sets);
  frontend::SpecResult r = frontend::compileSpecFile(spec.string(), options);
  REQUIRE(r.ok());
  ir::Graph g = std::move(*r.graph);
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::OptimizerPass>(opt).add<passes::DeadCodeElimination>();
  REQUIRE(pm.run(g).ok());
  return g;
}

// A stand-in for the remat pass, placed badly on purpose: every forward linear and elementwise
// activation whose result backward reads is cloned as a recompute node right after the
// original (operands that were cloned read the clones), and backward reads the clones.
size_t addRecompute(ir::Graph& g) {
  std::vector<ir::Node*> forward;
  for (const auto& n : g.nodes()) {
    std::string_view op = n->opName();
    if (n->phase() == ir::Phase::fwd && (op == "linear" || op == "gelu" || op == "relu" || op == "tanh" || op == "sigmoid"))
      forward.push_back(n.get());
  }
  std::unordered_map<const ir::Value*, ir::Value*> clone;
  for (ir::Node* f : forward) {
    std::vector<ir::Value*> operands;
    for (ir::Value* v : f->operands()) operands.push_back(clone.count(v) ? clone.at(v) : v);
    auto at = g.indexOf(f);
    REQUIRE(at.has_value());
    g.setInsertionPoint(*at + 1 < g.numNodes() ? g.nodes()[*at + 1].get() : nullptr);
    Expected<ir::Node*> r = g.create(f->op(), operands, f->attrs(), ir::Phase::recompute, f->specName());
    REQUIRE(r.ok());
    clone.emplace(f->result(0), (*r)->result(0));
  }
  g.setInsertionPoint(nullptr);
  for (const auto& [orig, copy] : clone) {
    std::vector<ir::Use> uses = orig->uses();
    for (const ir::Use& u : uses)
      if (u.user->phase() == ir::Phase::bwd) u.user->setOperand(u.operandIndex, copy);
  }
  return clone.size();
}

std::unordered_map<const ir::Node*, size_t> positions(const ir::Graph& g) {
  std::unordered_map<const ir::Node*, size_t> pos;
  for (size_t i = 0; i < g.numNodes(); ++i) pos.emplace(g.nodes()[i].get(), i);
  return pos;
}

// The schedule's invariants on a scheduled graph.
void checkInvariants(const ir::Graph& g) {
  Status verified = ir::verify(g);  // includes: every operand defined before its use
  if (!verified) FAIL(verified.message());
  auto pos = positions(g);
  for (size_t i = 0; i < g.numNodes(); ++i) {
    const ir::Node& n = *g.nodes()[i];
    // Updates: every other node that reads an updated parameter runs before the update.
    if (n.op().sideEffects)
      for (const ir::Value* v : n.operands()) {
        if (v->kind() != ir::ValueKind::Param) continue;
        for (const ir::Use& u : v->uses()) {
          CAPTURE(v->name());
          CHECK(pos.at(u.user) <= i);
        }
      }
    // Recompute: between a recompute node and its first user, only other recompute nodes and
    // tiny ones (scalars the same user needs).
    if (n.phase() == ir::Phase::recompute) {
      size_t first = g.numNodes();
      for (size_t r = 0; r < n.numResults(); ++r)
        for (const ir::Use& u : n.result(r)->uses()) first = std::min(first, pos.at(u.user));
      REQUIRE(first < g.numNodes());
      for (size_t k = i + 1; k < first; ++k) {
        const ir::Node& between = *g.nodes()[k];
        std::int64_t bytes = 0;
        for (size_t r = 0; r < between.numResults(); ++r) bytes += between.result(r)->type().bytes();
        CAPTURE(i);
        CAPTURE(k);
        CHECK((between.phase() == ir::Phase::recompute || (between.numResults() > 0 && bytes <= 64)));
      }
    }
  }
}

}  // namespace

TEST_CASE("schedule runs a node that frees more than it allocates before an unrelated one") {
  // Input order keeps both 4 kB intermediates alive at once; the schedule reduces each to its
  // sum first.
  std::string in = R"(graph g
  input %x : f32[1000]
  %0 = relu(%x) : f32[1000] fwd  # a
  %1 = tanh(%x) : f32[1000] fwd  # b
  %2 = sum_to(%0) {shape = [1]} : f32[1] fwd  # a.sum
  %3 = sum_to(%1) {shape = [1]} : f32[1] fwd  # b.sum
  %4 = add(%2, %3) : f32[1] fwd  # out
  output y = %4
)";
  std::string expected = R"(graph g
  input %x : f32[1000]
  %0 = relu(%x) : f32[1000] fwd  # a
  %1 = sum_to(%0) {shape = [1]} : f32[1] fwd  # a.sum
  %2 = tanh(%x) : f32[1000] fwd  # b
  %3 = sum_to(%2) {shape = [1]} : f32[1] fwd  # b.sum
  %4 = add(%1, %3) : f32[1] fwd  # out
  output y = %4
)";
  CHECK(runSchedule(in, true) == expected);
  ir::Graph before = testing::parseOrFail(in), after = testing::parseOrFail(expected);
  CHECK(passes::analyzeLiveness(after).peakBytes < passes::analyzeLiveness(before).peakBytes);
}

TEST_CASE("schedule keeps an order that frees nothing earlier, and says it did not change") {
  std::string in = R"(graph g
  input %x : f32[64]
  %0 = relu(%x) : f32[64] fwd  # a
  %1 = tanh(%0) : f32[64] fwd  # b
  %2 = add(%0, %1) : f32[64] fwd  # c
  output y = %2
)";
  CHECK(runSchedule(in, false) == in);
}

TEST_CASE("schedule delays a node whose result is used late") {
  // `late` is ready at once but only used at the end; `b` frees `a` as it runs, so it goes
  // first and `late`'s result is alive for one step less.
  std::string in = R"(graph g
  input %x : f32[256]
  %0 = relu(%x) : f32[256] fwd  # a
  %1 = tanh(%x) : f32[256] fwd  # late
  %2 = sigmoid(%0) : f32[256] fwd  # b
  %3 = add(%2, %1) : f32[256] fwd  # c
  output y = %3
)";
  std::string expected = R"(graph g
  input %x : f32[256]
  %0 = relu(%x) : f32[256] fwd  # a
  %1 = sigmoid(%0) : f32[256] fwd  # b
  %2 = tanh(%x) : f32[256] fwd  # late
  %3 = add(%1, %2) : f32[256] fwd  # c
  output y = %3
)";
  CHECK(runSchedule(in, true) == expected);
}

TEST_CASE("schedule sinks recompute nodes to just before their first use, in input order") {
  std::string in = R"(graph g
  input %x : f32[512]
  %0 = relu(%x) : f32[512] fwd  # a
  %1 = tanh(%0) : f32[512] fwd  # b
  %2 = tanh(%x) : f32[512] recompute  # a.re
  %3 = sigmoid(%2) : f32[512] recompute  # b.re
  %4 = sigmoid(%1) : f32[512] fwd  # c
  %5 = add(%4, %1) : f32[512] fwd  # d
  %6 = mul(%5, %3) : f32[512] bwd  # use
  output y = %6
)";
  std::string expected = R"(graph g
  input %x : f32[512]
  %0 = relu(%x) : f32[512] fwd  # a
  %1 = tanh(%0) : f32[512] fwd  # b
  %2 = sigmoid(%1) : f32[512] fwd  # c
  %3 = add(%2, %1) : f32[512] fwd  # d
  %4 = tanh(%x) : f32[512] recompute  # a.re
  %5 = sigmoid(%4) : f32[512] recompute  # b.re
  %6 = mul(%3, %5) : f32[512] bwd  # use
  output y = %6
)";
  CHECK(runSchedule(in, true) == expected);
}

TEST_CASE("schedule recomputes before an independent node when that frees the temporaries first") {
  // Sunk to its use, the recompute chain (r1 a temporary of r2) runs while p's result is
  // alive: 12 kB. Run one place earlier, r1 is freed before p allocates: 8 kB.
  std::string in = R"(graph g
  input %x : f32[1024]
  %0 = tanh(%x) : f32[1024] bwd  # p
  %1 = sigmoid(%x) : f32[1024] recompute  # r1
  %2 = relu(%1) : f32[1024] recompute  # r2
  %3 = sum_to(%2) {shape = [1]} : f32[1] bwd  # use
  %4 = add(%0, %3) : f32[1024] bwd  # last
  output y = %4
)";
  std::string expected = R"(graph g
  input %x : f32[1024]
  %0 = sigmoid(%x) : f32[1024] recompute  # r1
  %1 = relu(%0) : f32[1024] recompute  # r2
  %2 = tanh(%x) : f32[1024] bwd  # p
  %3 = sum_to(%1) {shape = [1]} : f32[1] bwd  # use
  %4 = add(%2, %3) : f32[1024] bwd  # last
  output y = %4
)";
  CHECK(runSchedule(in, true) == expected);
  ir::Graph before = testing::parseOrFail(in), after = testing::parseOrFail(expected);
  // r1's 4 kB fewer at the peak, which now holds the 4-byte sum beside p's result.
  CHECK(passes::analyzeLiveness(before).peakBytes - passes::analyzeLiveness(after).peakBytes == 4096 - 4);
}

TEST_CASE("schedule keeps readers of a parameter before its in-place update, and frees gradients early") {
  // Without clipping, each update needs only its gradient and the learning rate (tiny nodes,
  // which run right before the first update). The weight gradient of fb frees fa's output
  // and runs before the matmul; b's update must still wait for the matmul that reads b.
  std::string in = R"(graph g
  input %x : f32[32, 16]
  input %t : f32[32, 8]
  input %step : i64[]
  param %a : f32[16, 16]
  param %b : f32[8, 16]
  %0 = linear(%x, %a) : f32[32, 16] fwd  # fa
  %1 = linear(%0, %b) : f32[32, 8] fwd  # fb
  %2 = mse(%1, %t) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %1, %t) : f32[32, 8] bwd  # loss
  %5 = matmul(%4, %b) : f32[32, 16] bwd  # fb
  %6 = linear_weight_grad(%4, %0) : f32[8, 16] bwd  # fb
  %7 = linear_weight_grad(%5, %x) : f32[16, 16] bwd  # fa
  %8 = lr_schedule(%step) {lr = 0.1, min_lr = 0.1, total_steps = 1, warmup_steps = 0} : f32[] opt  # optimizer
  %9 = full() {dtype = f32, shape = [], value = 1.0} : f32[] opt  # optimizer
  sgd_step(%a, %7, %8, %9) {momentum = 0.0, weight_decay = 0.0} : () opt  # optimizer
  sgd_step(%b, %6, %8, %9) {momentum = 0.0, weight_decay = 0.0} : () opt  # optimizer
  output loss = %2
)";
  std::string expected = R"(graph g
  input %x : f32[32, 16]
  input %t : f32[32, 8]
  input %step : i64[]
  param %a : f32[16, 16]
  param %b : f32[8, 16]
  %0 = linear(%x, %a) : f32[32, 16] fwd  # fa
  %1 = linear(%0, %b) : f32[32, 8] fwd  # fb
  %2 = mse(%1, %t) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %1, %t) : f32[32, 8] bwd  # loss
  %5 = linear_weight_grad(%4, %0) : f32[8, 16] bwd  # fb
  %6 = matmul(%4, %b) : f32[32, 16] bwd  # fb
  %7 = linear_weight_grad(%6, %x) : f32[16, 16] bwd  # fa
  %8 = lr_schedule(%step) {lr = 0.1, min_lr = 0.1, total_steps = 1, warmup_steps = 0} : f32[] opt  # optimizer
  %9 = full() {dtype = f32, shape = [], value = 1.0} : f32[] opt  # optimizer
  sgd_step(%a, %7, %8, %9) {momentum = 0.0, weight_decay = 0.0} : () opt  # optimizer
  sgd_step(%b, %5, %8, %9) {momentum = 0.0, weight_decay = 0.0} : () opt  # optimizer
  output loss = %2
)";
  CHECK(runSchedule(in, true) == expected);
}

TEST_CASE("every bundled model: the schedule's invariants, with and without recompute, SGD and AdamW") {
  passes::OptimizerOptions sgd;
  sgd.kind = passes::OptimizerOptions::Kind::Sgd;
  passes::OptimizerOptions clipped;
  clipped.clipNorm = 1.0;
  for (const std::filesystem::path& spec : bundledModels()) {
    for (const passes::OptimizerOptions& opt : {passes::OptimizerOptions{}, sgd, clipped}) {
      for (bool recompute : {false, true}) {
        CAPTURE(spec.filename().string());
        CAPTURE(recompute);
        std::vector<std::pair<std::string, std::string>> sets;
        if (spec.stem() == "lstm-lm") sets = {{"seq", "64"}};
        ir::Graph g = trainingGraph(spec, sets, opt);
        if (recompute) {
          CHECK(addRecompute(g) > 0);
          REQUIRE(passes::DeadCodeElimination().run(g).ok());  // clones backward does not read
        }
        REQUIRE(ir::verify(g).ok());
        const std::int64_t inputPeak = passes::analyzeLiveness(g).peakBytes;
        std::string inputText = ir::printGraph(g);

        passes::PassManager pm;  // verifies after the pass
        pm.add<passes::Schedule>();
        Expected<bool> ran = pm.run(g);
        if (!ran) FAIL(ran.error().message);
        checkInvariants(g);
        const std::int64_t peak = passes::analyzeLiveness(g).peakBytes;
        MESSAGE(spec.stem().string() << std::string(recompute ? " with recompute" : "") << ": peak " << peak << " (input order "
                                     << inputPeak << ")");
        CHECK(peak <= inputPeak);

        // Deterministic, and a fixed point: scheduling the result again changes nothing.
        ir::Graph again = testing::parseOrFail(inputText);
        REQUIRE(passes::Schedule().run(again).ok());
        CHECK(ir::printGraph(again) == ir::printGraph(g));
        Expected<bool> second = passes::Schedule().run(g);
        REQUIRE(second.ok());
        CHECK_FALSE(*second);
      }
    }
  }
}

TEST_CASE("schedule is fast on 1,000-block chains (mlp depth 1000, lstm-lm seq 1000)") {
  std::filesystem::path models = std::filesystem::path(GRADC_SOURCE_DIR) / "models";
  for (auto [spec, set] : {std::pair{"mlp.yaml", std::pair<std::string, std::string>{"depth", "1000"}},
                           std::pair{"lstm-lm.yaml", std::pair<std::string, std::string>{"seq", "1000"}}}) {
    ir::Graph g = trainingGraph(models / spec, {set});
    auto start = std::chrono::steady_clock::now();
    Expected<bool> ran = passes::Schedule().run(g);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(ran.ok());
    MESSAGE(std::string(spec) << " " << set.first << "=" << set.second << ": " << g.numNodes() << " nodes scheduled in "
                 << seconds << " s");
    CHECK(seconds < 2.0);  // typically well under 0.5 s; generous for loaded CI machines
  }
}
