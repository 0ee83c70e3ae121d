// Fusing attention cores (passes/fuse_attention.h): the rewrite on every bundled model with
// attention (causal, bidirectional with dropout, grouped-query heads, cross-attention), what it
// leaves alone, its place in the planner's pipeline (on by elementwise fusion), and that the
// [batch, heads, T, T] buffers leave the plan. Numerical parity with the decomposition is checked
// by tests/runtime/attention_test.cpp and tests/cli/codegen_cli_test.sh.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "frontend/spec.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/fuse_attention.h"
#include "passes/schedule.h"
#include "passes/plan/training_planner.h"
#include "tests/bundled_model.h"

using namespace gradc;

namespace {

int countOp(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->opName() == op;
  return n;
}

const ir::Node* firstOp(const ir::Graph& g, std::string_view op) {
  for (const auto& node : g.nodes())
    if (node->opName() == op) return node.get();
  return nullptr;
}

// Values of shape [..., T, T] anywhere in the graph.
int squareValues(const ir::Graph& g, std::int64_t T) {
  int n = 0;
  for (const auto& node : g.nodes())
    for (size_t r = 0; r < node->numResults(); ++r) {
      const ir::Shape& s = node->result(r)->type().shape;
      n += s.size() >= 3 && s[s.size() - 1] == T && s[s.size() - 2] == T;
    }
  return n;
}

}  // namespace

TEST_CASE("fuse-attention: every bundled attention core becomes one attention node") {
  struct Model {
    std::string name;
    testing::DimOverrides dims;
    int layers;
    bool causal;
    double dropout;
  };
  const std::vector<Model> models{
      {"gpt-mini", {{"seq", "40"}, {"layers", "2"}}, 2, true, 0.0},
      {"gpt2", {{"batch", "1"}, {"seq", "40"}, {"layers", "2"}, {"vocab", "512"}}, 2, true, 0.1},
      {"bert-mlm", {{"seq", "40"}, {"layers", "3"}}, 3, false, 0.1},
      {"llama", {{"seq", "40"}, {"layers", "2"}}, 2, true, 0.0},  // grouped-query heads
  };
  for (const Model& m : models) {
    CAPTURE(m.name);
    ir::Graph g = testing::compileBundledModel(m.name, m.dims);
    const int softmaxes = countOp(g, "softmax"), matmuls = countOp(g, "matmul");
    CHECK(squareValues(g, 40) > 0);
    REQUIRE(passes::countFusableAttention(g) == m.layers);
    Expected<int> n = passes::fuseAttention(g);
    REQUIRE(n.ok());
    CHECK(*n == m.layers);
    CHECK(ir::verify(g).ok());
    CHECK(countOp(g, "attention") == m.layers);
    CHECK(countOp(g, "softmax") == softmaxes - m.layers);
    CHECK(countOp(g, "matmul") == matmuls - 2 * m.layers);
    CHECK(countOp(g, "causal_mask") == 0);
    CHECK(squareValues(g, 40) == 0);
    const ir::Node* a = firstOp(g, "attention");
    REQUIRE(a);
    CHECK(ir::getBool(a->attrs(), "causal") == m.causal);
    CHECK(ir::getFloat(a->attrs(), "p").value_or(0.0) == m.dropout);
    CHECK(ir::getInt(a->attrs(), "rng").has_value() == (m.dropout > 0));
    CHECK(passes::countFusableAttention(g) == 0);  // a second run finds nothing
  }
}

TEST_CASE("fuse-attention: cross-attention and grouped-query heads keep k and v shared") {
  const std::string spec = R"(model: cross
dims: {batch: 2, seq: 6, enc_seq: 9, d: 16}
inputs:
  x: {shape: [batch, seq, d]}
  enc: {shape: [batch, enc_seq, d]}
  y: {shape: [batch, seq, d]}
layers:
  - {op: attention, name: cross, input: x, heads: 4, kv_heads: 2, kv_input: enc}
loss: {op: mse, input: _, target: y}
)";
  frontend::SpecResult r = frontend::compileSpec(spec, "cross.yaml");
  REQUIRE(r.ok());
  ir::Graph g = std::move(*r.graph);
  REQUIRE(passes::fuseAttention(g).ok());
  const ir::Node* a = firstOp(g, "attention");
  REQUIRE(a);
  CHECK(ir::toString(a->operand(0)->type()) == "f32[2, 2, 2, 6, 4]");  // [B, KV, G, S, Dh]
  CHECK(ir::toString(a->operand(1)->type()) == "f32[2, 2, 1, 9, 4]");  // [B, KV, 1, S_kv, Dh]
  CHECK(ir::getBool(a->attrs(), "causal") == false);
}

TEST_CASE("fuse-attention: a softmax whose probabilities are read elsewhere, or not over keys, is left alone") {
  const std::string base = R"(graph g
param %q : f32[2, 5, 4]
param %k : f32[2, 5, 4]
param %v : f32[2, 5, 4]
%0 = transpose(%k) {dim0 = 1, dim1 = 2} : f32[2, 4, 5] fwd
%1 = matmul(%q, %0) : f32[2, 5, 5] fwd
%2 = scale(%1) {factor = 0.5} : f32[2, 5, 5] fwd
)";
  // The probabilities are also a graph output.
  Expected<ir::Graph> shared = ir::parseGraph(base + R"(%3 = softmax(%2) {dim = 2} : f32[2, 5, 5] fwd
%4 = matmul(%3, %v) : f32[2, 5, 4] fwd
output out = %4
output probs = %3
)", "shared");
  REQUIRE(shared.ok());
  CHECK(passes::countFusableAttention(*shared) == 0);
  // Softmax over the queries' axis.
  Expected<ir::Graph> otherAxis = ir::parseGraph(base + R"(%3 = softmax(%2) {dim = 1} : f32[2, 5, 5] fwd
%4 = matmul(%3, %v) : f32[2, 5, 4] fwd
output out = %4
)", "axis");
  REQUIRE(otherAxis.ok());
  CHECK(passes::countFusableAttention(*otherAxis) == 0);
  // The plain chain fuses, and the transpose of k goes with it.
  Expected<ir::Graph> plain = ir::parseGraph(base + R"(%3 = softmax(%2) {dim = 2} : f32[2, 5, 5] fwd
%4 = matmul(%3, %v) : f32[2, 5, 4] fwd
output out = %4
)", "plain");
  REQUIRE(plain.ok());
  REQUIRE(passes::fuseAttention(*plain).ok());
  CHECK(plain->numNodes() == 1);
  CHECK(ir::verify(*plain).ok());
}

TEST_CASE("fuse-attention in the planner: on with elementwise fusion; the T x T buffers leave the plan") {
  const ir::Graph forward = testing::compileBundledModel("gpt-mini", {{"batch", "2"}, {"seq", "200"}, {"layers", "2"}});
  passes::TrainingPlanOptions options;
  Expected<ir::Graph> plain = passes::trainingStepAsIs(forward, options);
  options.fuseElementwise = true;
  Expected<ir::Graph> fused = passes::trainingStepAsIs(forward, options);
  REQUIRE(plain.ok());
  REQUIRE(fused.ok());
  CHECK(countOp(*plain, "attention") == 0);
  CHECK(countOp(*fused, "attention") == 2);
  CHECK(countOp(*fused, "attention_backward") == 2);
  CHECK(squareValues(*plain, 200) > 0);
  CHECK(squareValues(*fused, 200) == 0);
  // The decomposition keeps each layer's probabilities [2, 4, 200, 200] (1.28 MB) for the
  // backward; the fused step keeps a log-sum-exp row [2, 4, 200] instead.
  const std::int64_t plainPeak = passes::scheduledPeakBytes(*plain), fusedPeak = passes::scheduledPeakBytes(*fused);
  MESSAGE("planned peak: decomposition " << plainPeak << " B, fused " << fusedPeak << " B");
  CHECK(fusedPeak + 2 * 4 * 200 * 200 * 4 <= plainPeak);
}
