#include <doctest/doctest.h>

#include "ir/dot_printer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "tests/ir/test_util.h"

using namespace gradc;
using namespace gradc::ir;
using gradc::testing::parseOrFail;

namespace {

// A small graph exercising multi-result nodes, every attribute kind, quoted names and specs.
const char* kSample = R"(graph tiny-mlp {model = "tiny mlp", seed = 7}
  input %x : f32[4, 8]
  input %y : f32[4, 2]
  input %"0" : i64[4]
  param %fc1.weight : f32[16, 8] {bound = 0.35355339059327373, init = "uniform"}
  param %fc1.bias : f32[16] {bound = 0.35355339059327373, init = "uniform"}
  param %ln.weight : f32[16] {init = "ones"}
  param %ln.bias : f32[16] {init = "zeros"}
  param %head.weight : f32[2, 16] {init = "normal", std = 0.02}
  %0 = linear(%x, %fc1.weight, %fc1.bias) : f32[4, 16] fwd  # fc1
  %1, %2, %3 = layer_norm(%0, %ln.weight, %ln.bias) {eps = 1e-05} : f32[4, 16], f32[4, 1], f32[4, 1] fwd  # ln
  %4 = gelu(%1) {approximate = "tanh"} : f32[4, 16] fwd  # act
  %5 = dropout(%4) {p = 0.1, rng = 0} : f32[4, 16] recompute  # "  spaced name  "
  %6 = linear(%5, %head.weight) : f32[4, 2] fwd  # head
  %7 = scale(%6) {factor = -inf} : f32[4, 2] bwd
  %8 = zeros() {dtype = f32, shape = [4, 2]} : f32[4, 2] opt
  %9 = add(%7, %8) : f32[4, 2] comm  # sum
  %10 = mse(%6, %y) : f32[] fwd  # loss
  output loss = %10
  output "odd name" = %9
)";

}  // namespace

TEST_CASE("print(parse(text)) reproduces canonical text byte for byte") {
  Graph g = parseOrFail(kSample);
  CHECK(printGraph(g) == kSample);
  Graph again = parseOrFail(printGraph(g));
  CHECK(printGraph(again) == printGraph(g));
}

TEST_CASE("results are renumbered in program order, whatever numbers the text used") {
  Graph g = parseOrFail(R"(graph g
  input %x : f32[2]
  %41 = relu(%x) : f32[2] fwd
  %7 = tanh(%41) : f32[2] fwd
  output out = %7
)");
  CHECK(printGraph(g) == "graph g\n  input %x : f32[2]\n  %0 = relu(%x) : f32[2] fwd\n  %1 = tanh(%0) : f32[2] fwd\n"
                         "  output out = %1\n");
}

TEST_CASE("comments and blank lines are ignored") {
  Graph g = parseOrFail("# a comment\n\ngraph g\n  # inside\n  input %x : f32[2]\n  output o = %x\n");
  CHECK(g.inputs().size() == 1);
}

TEST_CASE("parse errors carry line and column") {
  struct Bad {
    const char* text;
    const char* expected;
  };
  const Bad cases[] = {
      {"", "<t>:1:1: error: expected 'graph NAME'"},
      {"input %x : f32[2]\n", "<t>:1:1: error: expected 'graph NAME' first"},
      {"graph g\n  input %x : f33[2]\n", "<t>:2:14: error: unknown dtype 'f33'"},
      {"graph g\n  input %x : f32[0]\n", "<t>:2:18: error: extents must be positive"},
      {"graph g\n  input %x : f32[2]\n  %0 = relu(%y) : f32[2] fwd\n", "<t>:3:13: error: '%y' is not defined"},
      {"graph g\n  input %x : f32[2]\n  %0 = frobnicate(%x) : f32[2] fwd\n", "<t>:3:8: error: unknown op 'frobnicate'"},
      {"graph g\n  input %x : f32[2]\n  %0 = relu(%x) : f32[2] backward\n", "<t>:3:26: error: unknown phase 'backward'"},
      {"graph g\n  input %x : f32[2]\n  %0 = relu(%x) : f32[2], f32[2] fwd\n", "1 result(s) but 2 type(s)"},
      {"graph g\n  input %x : f32[2]\n  %0 = relu(%x) : f32[2] fwd\n  %0 = relu(%x) : f32[2] fwd\n",
       "<t>:4:3: error: '%0' is already defined"},
      {"graph g\n  input %x : f32[2]\n  input %x : f32[2]\n", "<t>:3:9: error: '%x' is already defined"},
      {"graph g\n  input %x : f32[2]\n  %0 = scale(%x) {factor = 1.5.2} : f32[2] fwd\n", "malformed number"},
      {"graph g\n  input %x : f32[99999999999999999999]\n", "integer out of range"},
      {"graph g\n  input %x : f32[2]\n  output o = %x\n  output o = %x\n", "output 'o' is declared twice"},
      {"graph g\n  input %x : f32[2]\n  %0 = scale(%x) {factor = \"unterminated} : f32[2] fwd\n", "unterminated string"},
  };
  for (const Bad& b : cases) {
    CAPTURE(b.text);
    Expected<Graph> g = parseGraph(b.text, "<t>");
    REQUIRE_FALSE(g.ok());
    CHECK_MESSAGE(g.error().message.find(b.expected) != std::string::npos, g.error().message);
  }
}

TEST_CASE("the dot printer names every node and edge deterministically") {
  Graph g = parseOrFail(kSample);
  std::string dot = printDot(g);
  CHECK(dot.rfind("digraph \"tiny-mlp\" {", 0) == 0);
  CHECK(dot.find("\"vfc1.weight\" -> \"n0\"") != std::string::npos);
  CHECK(dot.find("layer_norm\\nf32[4, 16]\\nf32[4, 1]\\nf32[4, 1]\\nln") != std::string::npos);
  CHECK(dot.find("\"n10\" -> \"out_loss\"") != std::string::npos);
  CHECK(dot == printDot(parseOrFail(printGraph(g))));
}
