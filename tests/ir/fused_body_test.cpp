// The body of a fused node: text round trip, the errors of a malformed body, type inference
// through the steps' own rules, and kernel names shared exactly by identical arithmetic.
#include <doctest/doctest.h>

#include "ir/fused_body.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

using namespace gradc;
using namespace gradc::ir;

namespace {
TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
}  // namespace

TEST_CASE("a fused body prints what it parses, byte for byte") {
  const std::string text =
      "%0 = add($0, $1) @blocks.0.res; %1 = gelu(%0) {approximate = tanh} @blocks.0.act; "
      "%2 = scale(%1) {factor = 0.125}; return %2, %0";
  Expected<FusedBody> body = parseFusedBody(text);
  REQUIRE(body);
  CHECK(body->steps.size() == 3);
  CHECK(body->steps[1].op->name == "gelu");
  CHECK(*getString(body->steps[1].attrs, "approximate") == "tanh");
  CHECK(*getFloat(body->steps[2].attrs, "factor") == 0.125);
  CHECK(body->steps[0].specName == "blocks.0.res");
  CHECK(body->steps[2].specName.empty());
  CHECK(body->outputs == std::vector<int>{2, 0});
  CHECK(body->steps[1].operands == std::vector<FusedOperand>{{false, 0}});
  CHECK(printFusedBody(*body) == text);
}

TEST_CASE("malformed bodies are errors that say where and what") {
  struct Bad {
    const char* text;
    const char* contains;
  };
  for (const Bad& b : {Bad{"%0 = add($0, $1)", "expected ';'"}, Bad{"%0 = frob($0); return %0", "unknown op 'frob'"},
                       Bad{"%0 = matmul($0, $1); return %0", "cannot be fused"},
                       Bad{"%0 = softmax($0) {dim = 0}; return %0", "cannot be fused"},
                       Bad{"%1 = relu($0); return %1", "expected step %0"},
                       Bad{"%0 = relu(%0); return %0", "not an earlier step"},
                       Bad{"%0 = relu($0); return %3", "not a step"},
                       Bad{"%0 = scale($0) {factor = big}; return %0", "expected a number"},
                       Bad{"%0 = scale($0) {size = 2}; return %0", "no attribute 'size'"},
                       Bad{"return %0", "not a step"}, Bad{"%0 = relu($0); return %0 junk", "unexpected text"}}) {
    CAPTURE(b.text);
    Expected<FusedBody> body = parseFusedBody(b.text);
    REQUIRE_FALSE(body);
    CHECK(body.error().message.find(b.contains) != std::string::npos);
    CHECK(body.error().message.find("column") != std::string::npos);
  }
}

TEST_CASE("step types come from each op's rule; reading a missing operand is an error") {
  Expected<FusedBody> body = parseFusedBody("%0 = mul($0, $1); %1 = sigmoid(%0); return %1");
  REQUIRE(body);
  Expected<std::vector<TensorType>> types = inferFusedSteps(*body, std::vector<TensorType>{f32({2, 3}), f32({3})});
  REQUIRE(types);
  CHECK(*types == std::vector<TensorType>{f32({2, 3}), f32({2, 3})});
  Expected<std::vector<TensorType>> missing = inferFusedSteps(*body, std::vector<TensorType>{f32({2, 3})});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find("reads $1") != std::string::npos);
}

TEST_CASE("a graph with a fused node round-trips and verifies") {
  Graph g("t");
  Value* x = g.addInput("x", f32({4, 8}));
  Value* b = g.addParam("b", f32({8}));
  std::vector<Value*> operands{x, b};
  Expected<Node*> n = g.create("fused", operands,
                               {{"body", std::string("%0 = add($0, $1) @fc; %1 = relu(%0) @act; return %1")}},
                               Phase::fwd, "fc");
  REQUIRE(n);
  g.setOutput("y", (*n)->result());
  CHECK((*n)->flops() == 2 * 32);  // one add and one relu per element
  CHECK((*n)->workspaceBytes(1) == 0);
  REQUIRE(verify(g));
  const std::string text = printGraph(g);
  Expected<Graph> back = parseGraph(text, "t.gir");
  REQUIRE(back);
  CHECK(printGraph(*back) == text);
}

TEST_CASE("kernel names: one per arithmetic and types, whatever the spec names") {
  const std::vector<TensorType> in{f32({4, 8})}, out{f32({4, 8})};
  const std::string a = fusedKernelName("%0 = relu($0) @blocks.0.act; %1 = exp(%0) @blocks.0.e; return %1", in, out);
  const std::string b = fusedKernelName("%0 = relu($0) @blocks.1.act; %1 = exp(%0) @blocks.1.e; return %1", in, out);
  const std::string c = fusedKernelName("%0 = relu($0); %1 = tanh(%0); return %1", in, out);
  const std::string d = fusedKernelName("%0 = relu($0); %1 = exp(%0); return %1", std::vector<TensorType>{f32({8, 4})},
                                        std::vector<TensorType>{f32({8, 4})});
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  CHECK(a.rfind("gradc_fused_", 0) == 0);
  // Random streams are kernel arguments: dropouts of different layers share a kernel.
  CHECK(fusedKernelName("%0 = dropout($0) {p = 0.1, rng = 3}; return %0", in, out) ==
        fusedKernelName("%0 = dropout($0) {p = 0.1, rng = 9, rng_offset = 64}; return %0", in, out));
  CHECK(fusedKernelName("%0 = dropout($0) {p = 0.1, rng = 3}; return %0", in, out) !=
        fusedKernelName("%0 = dropout($0) {p = 0.2, rng = 3}; return %0", in, out));
  Expected<FusedBody> random = parseFusedBody("%0 = dropout($0) {p = 0.1, rng = 3}; %1 = relu(%0); "
                                              "%2 = dropout(%1) {p = 0.1, rng = 4, rng_offset = 8}; return %2");
  REQUIRE(random);
  CHECK(fusedRandomStreams(*random) == std::vector<std::int64_t>{3, 0, 4, 8});
  CHECK(a.size() == 12 + 16);
}
