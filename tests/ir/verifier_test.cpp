#include <doctest/doctest.h>

#include "ir/index_bounds.h"
#include "ir/verifier.h"
#include "tests/ir/test_util.h"

using namespace gradc;
using namespace gradc::ir;

namespace {
Status verifyText(const std::string& text) {
  Expected<Graph> g = parseGraph(text, "v.gir");
  if (!g) return g.error();
  return verify(*g);
}
const std::string kHeader = "graph g\n  input %x : f32[4, 8]\n  param %w : f32[2, 8]\n";
}  // namespace

TEST_CASE("the verifier accepts well-formed graphs") {
  CHECK(verifyText(kHeader + "  %0 = linear(%x, %w) : f32[4, 2] fwd\n  output o = %0\n").ok());
}

TEST_CASE("the verifier rejects malformed IR, naming the node") {
  struct Bad {
    std::string body;
    std::string expected;
  };
  const Bad cases[] = {
      {"  %0 = linear(%x, %w) : f32[4, 3] fwd\n", "result 0 is typed f32[4, 3] but linear infers f32[4, 2]"},
      {"  %0 = linear(%x, %w) : i64[4, 2] fwd\n", "infers f32[4, 2]"},
      {"  %0 = matmul(%x, %w) : f32[4, 8] fwd\n", "inner dimensions differ"},
      {"  %0 = relu(%x) {alpha = 1.0} : f32[4, 8] fwd\n", "unknown attribute 'alpha'"},
      {"  %0 = softmax(%x) : f32[4, 8] fwd\n", "missing attribute 'dim'"},
      {"  %0 = softmax(%x) {dim = 1.0} : f32[4, 8] fwd\n", "attribute 'dim' must be int, got float"},
      {"  %0, %1 = relu(%x) : f32[4, 8], f32[4, 8] fwd\n", "has 2 result(s), the op defines 1"},
      {"  %0 = relu(%x, %x) : f32[4, 8] fwd\n", "expects 1 operand(s), got 2"},
      {"  param %w : f32[2, 8]\n", "'%w' is already defined"},
  };
  for (const Bad& b : cases) {
    CAPTURE(b.body);
    Status s = verifyText(kHeader + b.body);
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find(b.expected) != std::string::npos);
  }
  Status s = verifyText(kHeader + "  %0 = linear(%x, %w) : f32[4, 3] fwd  # blocks.0.fc\n");
  CHECK(s.message().find("at '%0 = linear(%x, %w) : f32[4, 3] fwd  # blocks.0.fc'") != std::string::npos);
}

TEST_CASE("the verifier catches a use before its definition after a bad reorder") {
  Graph g = testing::parseOrFail(kHeader + "  %0 = linear(%x, %w) : f32[4, 2] fwd\n  %1 = relu(%0) : f32[4, 2] fwd\n");
  CHECK(verify(g).ok());
  g.reorder({g.nodes()[1].get(), g.nodes()[0].get()});
  Status s = verify(g);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("used before it is defined") != std::string::npos);
}

TEST_CASE("graph rewrites keep use lists exact") {
  Graph g = testing::parseOrFail(kHeader + "  %0 = linear(%x, %w) : f32[4, 2] fwd\n  %1 = relu(%0) : f32[4, 2] fwd\n"
                                           "  %2 = tanh(%0) : f32[4, 2] fwd\n  output o = %1\n");
  Value* lin = g.nodes()[0]->result();
  CHECK(lin->uses().size() == 2);
  Node* relu = g.nodes()[1].get();
  Value* sig = (*g.create("sigmoid", std::vector<Value*>{lin}))->result();
  g.replaceAllUsesWith(relu->result(), sig);
  CHECK_FALSE(relu->result()->hasUses());
  g.erase(relu);
  CHECK(g.findOutput("o") == sig);
  // The new node was appended after its use by the output only, which is fine: outputs are
  // read at the end.
  CHECK(verify(g).ok());
  CHECK(lin->uses().size() == 2);  // tanh and sigmoid
  Expected<Node*> bad = g.create("matmul", std::vector<Value*>{lin, lin});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("inner dimensions differ") != std::string::npos);
  CHECK(g.numNodes() == 3);  // a failed create changes nothing
  CHECK(lin->uses().size() == 2);
}

TEST_CASE("index bounds of integer inputs come from their uses") {
  Graph g = testing::parseOrFail(R"(graph g
  input %tokens : i64[2, 4]
  input %targets : i64[2, 4]
  param %wte : f32[300, 8]
  param %head : f32[256, 8]
  %0 = embedding(%wte, %tokens) : f32[2, 4, 8] fwd  # wte
  %1 = linear(%0, %head) : f32[2, 4, 256] fwd  # head
  %2 = cross_entropy(%1, %targets) : f32[] fwd  # loss
  %3 = embedding(%head, %tokens) : f32[2, 4, 8] fwd  # tied
  output loss = %2
)");
  std::optional<IndexBound> tokens = indexBound(*g.findNamed("tokens"));
  REQUIRE(tokens.has_value());
  CHECK(tokens->bound == 256);  // the tightest of the two embeddings
  CHECK(tokens->specName == "tied");
  std::optional<IndexBound> targets = indexBound(*g.findNamed("targets"));
  REQUIRE(targets.has_value());
  CHECK(targets->bound == 256);
  CHECK(targets->op == "cross_entropy");
  CHECK_FALSE(indexBound(*g.findNamed("wte")).has_value());
}
