// Dead-code elimination: text in, text out.
#include <doctest/doctest.h>

#include "passes/dce.h"
#include "tests/ir/test_util.h"

using namespace gradc;

namespace {
std::string runDce(const std::string& text, bool expectChange) {
  ir::Graph g = testing::parseOrFail(text);
  passes::DeadCodeElimination dce;
  Expected<bool> changed = dce.run(g);
  REQUIRE(changed.ok());
  CHECK(*changed == expectChange);
  return ir::printGraph(g);
}
}  // namespace

TEST_CASE("dce removes chains that reach no output, keeps the rest in order") {
  std::string in = R"(graph g
  input %x : f32[4]
  param %unused : f32[4]
  %0 = relu(%x) : f32[4] fwd  # a
  %1 = tanh(%0) : f32[4] fwd  # dead1
  %2 = sigmoid(%1) : f32[4] fwd  # dead2
  %3 = add(%0, %x) : f32[4] fwd  # b
  output o = %3
)";
  std::string expected = R"(graph g
  input %x : f32[4]
  param %unused : f32[4]
  %0 = relu(%x) : f32[4] fwd  # a
  %1 = add(%0, %x) : f32[4] fwd  # b
  output o = %1
)";
  CHECK(runDce(in, true) == expected);
}

TEST_CASE("dce keeps a multi-result node when any result is used") {
  std::string in = R"(graph g
  input %x : f32[2, 4]
  param %w : f32[4]
  param %b : f32[4]
  %0, %1, %2 = layer_norm(%x, %w, %b) {eps = 1e-05} : f32[2, 4], f32[2, 1], f32[2, 1] fwd
  output y = %0
)";
  CHECK(runDce(in, false) == in);
}

TEST_CASE("dce on a graph with nothing dead reports no change") {
  std::string in = "graph g\n  input %x : f32[4]\n  %0 = relu(%x) : f32[4] fwd\n  output o = %0\n";
  CHECK(runDce(in, false) == in);
}
