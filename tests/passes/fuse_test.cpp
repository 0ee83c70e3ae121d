// The elementwise fusion pass: which nodes form a region, what a region reads and returns, and
// the cases that must stay apart (a use outside the region before its end, another phase, an
// allocation while a region's inputs would be kept alive), strided operands read in place.
#include <doctest/doctest.h>

#include "../ir/test_util.h"
#include "ir/fused_body.h"
#include "ir/verifier.h"
#include "passes/fuse.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

using namespace gradc;
using gradc::testing::parseOrFail;

namespace {

// Runs the pass on IR text; returns the fused graph's text (verified, and round-tripped).
std::string fuse(const std::string& text, passes::FuseStats* stats = nullptr) {
  ir::Graph g = parseOrFail(text);
  Expected<passes::FuseStats> s = passes::fuseElementwise(g);
  REQUIRE(s);
  if (stats) *stats = *s;
  REQUIRE(ir::verify(g));
  const std::string printed = ir::printGraph(g);
  CHECK(ir::printGraph(parseOrFail(printed)) == printed);
  return printed;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("a chain of elementwise ops becomes one node; only values used outside are results") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %x : f32[4, 8]
  param %b : f32[8]
  param %w : f32[8, 8]
  %0 = add(%x, %b) : f32[4, 8] fwd  # fc
  %1 = relu(%0) : f32[4, 8] fwd  # act
  %2 = scale(%1) {factor = 0.5} : f32[4, 8] fwd  # half
  %3 = matmul(%2, %w) : f32[4, 8] fwd  # proj
  output y = %3
)", &stats);
  CHECK(stats.regions == 1);
  CHECK(stats.fusedNodes == 3);
  CHECK(has(out, "%0 = fused(%x, %b) {body = \"%0 = add($0, $1) @fc; %1 = relu(%0) @act; "
                 "%2 = scale(%1) {factor = 0.5} @half; return %2\"} : f32[4, 8] fwd"));
  CHECK(has(out, "%1 = matmul(%0, %w)"));
}

TEST_CASE("values used after the region and graph outputs are results, in program order") {
  const std::string out = fuse(R"(graph t
  input %x : f32[4, 8]
  %0 = tanh(%x) : f32[4, 8] fwd  # a
  %1 = exp(%0) : f32[4, 8] fwd  # b
  %2 = mul(%1, %0) : f32[4, 8] fwd  # c
  %3 = softmax(%0) {dim = 1} : f32[4, 8] fwd  # s
  output y = %2
  output e = %1
)");
  CHECK(has(out, "%0, %1, %2 = fused(%x) {body = \"%0 = tanh($0) @a; %1 = exp(%0) @b; %2 = mul(%1, %0) @c; "
                 "return %0, %1, %2\"}"));
  CHECK(has(out, "softmax(%0)"));
}

TEST_CASE("a node does not join a region whose value an outside node reads before it") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %x : f32[4, 8]
  param %w : f32[8, 8]
  %0 = relu(%x) : f32[4, 8] fwd
  %1 = matmul(%0, %w) : f32[4, 8] fwd
  %2 = exp(%0) : f32[4, 8] fwd
  %3 = add(%2, %1) : f32[4, 8] fwd
  output y = %3
)", &stats);
  // exp cannot join relu (matmul reads relu's value before exp), but add joins exp.
  CHECK(stats.regions == 1);
  CHECK(has(out, "= relu(%x)"));
  CHECK(has(out, "fused(%0, %1) {body = \"%0 = exp($0); %1 = add(%0, $1); return %1\"}"));
}

TEST_CASE("regions stay within one phase and one iteration space") {
  passes::FuseStats stats;
  fuse(R"(graph t
  input %x : f32[4, 8]
  input %g : f32[4, 8]
  input %v : f32[8]
  %0 = relu(%x) : f32[4, 8] fwd
  %1 = exp(%v) : f32[8] fwd
  %2 = relu_backward(%g, %0) : f32[4, 8] bwd
  %3 = mul(%2, %1) : f32[4, 8] bwd
  output y = %3
)", &stats);
  // relu (fwd) and relu_backward (bwd) stay apart; exp's [8] is not mul's [4, 8] space, but the
  // two backward ops fuse, reading exp's result broadcast.
  CHECK(stats.regions == 1);
  CHECK(stats.fusedNodes == 2);
}

TEST_CASE("strided operands are read in place with their strides; f16 is never fused; dropout is") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %x : f32[8, 4]
  input %h : f16[4, 4]
  %0 = transpose(%x) {dim0 = 0, dim1 = 1} : f32[4, 8] fwd
  %1 = relu(%0) : f32[4, 8] fwd
  %2 = exp(%1) : f32[4, 8] fwd
  %3 = dropout(%2) {p = 0.5, rng = 1} : f32[4, 8] fwd
  %4 = tanh(%3) : f32[4, 8] fwd
  %5 = relu(%h) : f16[4, 4] fwd
  %6 = exp(%5) : f16[4, 4] fwd
  output y = %4
  output z = %6
)", &stats);
  // relu reads the transposed view through its strides, with exp, dropout and tanh; f16 does not fuse.
  CHECK(stats.regions == 1);
  CHECK(has(out, "= fused(%0) {body = \"%0 = relu($0); %1 = exp(%0); %2 = dropout(%1) {p = 0.5, rng = 1}; "
                 "%3 = tanh(%2); return %3\", strides = [1, 4]}"));
  CHECK(has(out, "= relu(%h)"));
}

TEST_CASE("no region spans an allocation: an accumulation chain keeps its terms' short lives") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %x : f32[4, 8]
  input %w : f32[8, 8]
  %0 = matmul(%x, %w) : f32[4, 8] bwd
  %1 = matmul(%0, %w) : f32[4, 8] bwd
  %2 = relu(%0) : f32[4, 8] bwd
  %3 = add(%2, %1) : f32[4, 8] bwd
  %4 = matmul(%x, %w) : f32[4, 8] bwd
  %5 = add(%3, %4) : f32[4, 8] bwd
  output y = %5
)", &stats);
  // relu + add fuse; the second add would keep their terms %0 and %1 alive across %4.
  CHECK(stats.regions == 1);
  CHECK(has(out, "fused(%0, %1) {body = \"%0 = relu($0); %1 = add(%0, $1); return %1\"}"));
  CHECK(has(out, "= add(%2, %3)"));
}

TEST_CASE("a region reading only parameters and inputs may fuse across an allocation") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %a : f32[4, 8]
  input %b : f32[4, 8]
  input %w : f32[8, 8]
  %0 = relu(%a) : f32[4, 8] bwd
  %1 = add(%0, %b) : f32[4, 8] bwd
  %2 = matmul(%b, %w) : f32[4, 8] bwd
  %3 = add(%1, %2) : f32[4, 8] bwd
  output y = %3
)", &stats);
  // %a and %b stay alive throughout: fusing the second add keeps no buffer alive longer, and
  // %1 is no longer stored across the matmul.
  CHECK(stats.regions == 1);
  CHECK(has(out, "fused(%a, %b, %0) {body = \"%0 = relu($0); %1 = add(%0, $1); %2 = add(%1, $2); return %2\"}"));
}

TEST_CASE("a region may fuse across an allocation when the values it reads stay alive through it") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %x : f32[4, 8]
  input %w : f32[8, 8]
  %0 = matmul(%x, %w) : f32[4, 8] bwd
  %1 = exp(%x) : f32[4, 8] fwd
  %2 = tanh(%x) : f32[4, 8] fwd
  %3 = mul(%0, %2) : f32[4, 8] bwd
  %4 = mul(%0, %1) : f32[4, 8] bwd
  %5 = sigmoid_backward(%3, %1) : f32[4, 8] bwd
  %6 = tanh_backward(%4, %2) : f32[4, 8] bwd
  output a = %5
  output b = %6
)", &stats);
  // An LSTM cell's two branches from one gradient %0: d(o) = %0 * tanh(c), d(tanh c) = %0 * o.
  // sigmoid_backward joins %3's region across %4's allocation because %3's inputs stay alive
  // through it (%4 reads %0 and %1; %6 reads %2); tanh_backward then joins %4's region across
  // that region's fused node, which reads %0 and %1 at %5's place. (Without that rule, four
  // nodes apart.) The two forward ops form no region: one node each.
  CHECK(stats.regions == 2);
  CHECK(stats.fusedNodes == 4);
  CHECK(has(out, "fused(%0, %2, %1) {body = \"%0 = mul($0, $1); %1 = sigmoid_backward(%0, $2); return %1\"}"));
  CHECK(has(out, "fused(%0, %1, %2) {body = \"%0 = mul($0, $1); %1 = tanh_backward(%0, $2); return %1\"}"));
}

TEST_CASE("a region does not fuse across an allocation when that would keep its inputs alive") {
  passes::FuseStats stats;
  fuse(R"(graph t
  input %x : f32[4, 8]
  input %w : f32[8, 8]
  %0 = matmul(%x, %w) : f32[4, 8] bwd
  %1 = matmul(%0, %w) : f32[4, 8] bwd
  %2 = relu(%1) : f32[4, 8] bwd
  %3 = matmul(%x, %w) : f32[4, 8] bwd
  %4 = exp(%2) : f32[4, 8] bwd
  output a = %4
  output b = %3
)", &stats);
  // relu's input %1 is last read by relu: fusing exp into it would keep %1 alive across %3.
  CHECK(stats.regions == 0);
}

TEST_CASE("a reshape of contiguous memory is read in place") {
  passes::FuseStats stats;
  fuse(R"(graph t
  input %x : f32[32]
  %0 = reshape(%x) {shape = [4, 8]} : f32[4, 8] fwd
  %1 = relu(%0) : f32[4, 8] fwd
  %2 = exp(%1) : f32[4, 8] fwd
  output y = %2
)", &stats);
  CHECK(stats.regions == 1);
}

TEST_CASE("two regions merge through a node that reads both") {
  passes::FuseStats stats;
  const std::string out = fuse(R"(graph t
  input %x : f32[4, 8]
  input %z : f32[4, 8]
  %0 = relu(%x) : f32[4, 8] fwd
  %1 = exp(%0) : f32[4, 8] fwd
  %2 = tanh(%z) : f32[4, 8] fwd
  %3 = sigmoid(%2) : f32[4, 8] fwd
  %4 = add(%1, %3) : f32[4, 8] fwd
  output y = %4
)", &stats);
  CHECK(stats.regions == 1);
  CHECK(stats.fusedNodes == 5);
  CHECK(has(out, "fused(%x, %z)"));
}

TEST_CASE("in the training pipeline: regions on lstm-lm, one-pass AdamW, plans no larger than unfused") {
  ir::Graph forward = gradc::testing::compileBundledModel("lstm-lm", {{"batch", "2"}, {"seq", "8"}});
  passes::TrainingPlanOptions options;
  Expected<passes::TrainingStepResult> plain = passes::buildTrainingStepPipeline(forward, options, {});
  REQUIRE(plain);
  options.fuseElementwise = true;
  Expected<passes::TrainingStepResult> fused = passes::buildTrainingStepPipeline(forward, options, {});
  REQUIRE(fused);
  int regions = 0, updates = 0, onePass = 0;
  for (const auto& n : fused->graph.nodes()) {
    regions += n->opName() == "fused";
    if (n->opName() == "adamw_step") {
      ++updates;
      onePass += ir::getBool(n->attrs(), "fused").value_or(false);
    }
  }
  for (const auto& n : plain->graph.nodes()) CHECK(n->opName() != "fused");
  CHECK(regions > 0);
  CHECK(updates > 0);
  CHECK(onePass == updates);
  // The fused step keeps no more than the unfused one: no intermediates, no AdamW temporaries.
  MESSAGE("lstm-lm peak: fused " << fused->plan.peakBytes << " B, unfused " << plain->plan.peakBytes << " B");
  CHECK(fused->plan.peakBytes <= plain->plan.peakBytes);
}

TEST_CASE("on every bundled model the fused step without recompute plans no more than the unfused one") {
  const std::vector<std::pair<std::string, gradc::testing::DimOverrides>> models = {
      {"mlp", {}},
      {"gpt-mini", {{"batch", "2"}, {"seq", "32"}, {"layers", "2"}}},
      {"lstm-lm", {{"batch", "2"}, {"seq", "16"}}},
      {"llama", {{"batch", "2"}, {"seq", "32"}, {"layers", "2"}}},
      {"bert-mlm", {{"batch", "2"}, {"seq", "32"}, {"layers", "2"}}},
      {"gpt2", {{"batch", "1"}, {"seq", "32"}, {"layers", "1"}, {"vocab", "512"}}},
  };
  for (const auto& [model, dims] : models) {
    CAPTURE(model);
    ir::Graph forward = gradc::testing::compileBundledModel(model, dims);
    for (passes::RematStrategy strategy : {passes::RematStrategy::None, passes::RematStrategy::Sqrt}) {
      passes::TrainingPlanOptions options;
      options.remat = strategy;
      Expected<passes::TrainingStepResult> plain = passes::buildTrainingStepPipeline(forward, options, {});
      options.fuseElementwise = true;
      Expected<passes::TrainingStepResult> fused = passes::buildTrainingStepPipeline(forward, options, {});
      REQUIRE(plain);
      REQUIRE(fused);
      MESSAGE(model << " " << passes::rematStrategyName(strategy) << ": fused " << fused->plan.peakBytes
                    << " B, unfused " << plain->plan.peakBytes << " B");
      // Without recompute the guarantee is exact. A recompute strategy plans the fused graph on its
      // own terms (sqrt segments a different node list), so its peak may differ either way.
      if (strategy == passes::RematStrategy::None) CHECK(fused->plan.peakBytes <= plain->plan.peakBytes);
    }
  }
}
