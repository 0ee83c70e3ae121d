// Autodiff's contract with the op table and its refusals: the gradient rule table covers every
// differentiable forward op and only those; a graph it cannot differentiate is an error naming
// why (no loss, a non-scalar or integer loss, a second run, an op without a rule, a loss that
// depends on layer_norm's statistics). The rules' output, text in and text out, is in
// autodiff_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "passes/grad_rules.h"
#include "tests/ir/test_util.h"

using namespace gradc;

namespace {

std::string autodiffError(const std::string& text) {
  ir::Graph g = testing::parseOrFail(text);
  passes::Autodiff autodiff;
  Expected<bool> changed = autodiff.run(g);
  REQUIRE_FALSE(changed.ok());
  return changed.error().message;
}

bool hasRule(std::string_view op) { return passes::findGradRule(op) != nullptr; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the gradient rule table covers every differentiable forward op, and only ops of the table") {
  // The forward ops of ir/ops.cpp (forwardOps()); a new one needs a rule here.
  const char* differentiable[] = {"embedding", "add", "sub", "mul", "scale", "matmul", "linear", "relu",
                                  "gelu", "tanh", "sigmoid", "softmax", "log_softmax", "layer_norm",
                                  "dropout", "causal_mask", "reshape", "transpose", "slice", "select",
                                  "split", "stack", "unbind", "zeros", "cross_entropy", "mse"};
  for (const char* op : differentiable) {
    CAPTURE(op);
    CHECK(ir::findOp(op) != nullptr);
    CHECK(hasRule(op));
  }
  std::vector<std::string_view> ruled = passes::gradRuleOps();
  CHECK(std::is_sorted(ruled.begin(), ruled.end()));
  CHECK(std::adjacent_find(ruled.begin(), ruled.end()) == ruled.end());
  for (std::string_view op : ruled) {
    CAPTURE(op);
    CHECK(ir::findOp(op) != nullptr);
  }
  // Backward and optimizer ops are never differentiated (no double backward), and side-effect
  // ops have no gradient -- except the gathers of the loss placement gather, which are forward
  // ops whose gradient is the matching scatter; the other collectives come after autodiff.
  for (const char* op : {"relu_backward", "layer_norm_backward", "sum_to", "linear_weight_grad",
                         "cross_entropy_backward", "global_norm", "sgd_step", "adamw_step"})
    CHECK_FALSE(hasRule(op));
  CHECK(hasRule("gather"));
  CHECK(hasRule("gather_send"));
  for (const ir::OpInfo& op : ir::allOps())
    if (op.sideEffects && op.name != "gather" && op.name != "gather_send") CHECK_FALSE(hasRule(op.name));
}

TEST_CASE("autodiff errors: no loss, non-scalar or integer loss, a second run") {
  std::string noLoss = "graph g\n  param %w : f32[4]\n  %0 = relu(%w) : f32[4] fwd\n  output out = %0\n";
  std::string message = autodiffError(noLoss);
  CHECK(contains(message, "no 'loss' output"));
  CHECK(contains(message, "outputs: out"));

  std::string vectorLoss = "graph g\n  param %w : f32[4]\n  %0 = relu(%w) : f32[4] fwd\n  output loss = %0\n";
  CHECK(contains(autodiffError(vectorLoss), "the loss must be a float scalar such as f32[], got f32[4]"));

  std::string intLoss = "graph g\n  input %n : i64[]\n  output loss = %n\n";
  CHECK(contains(autodiffError(intLoss), "got i64[]"));

  std::string ok = R"(graph g
  input %t : f32[4]
  param %w : f32[4]
  %0 = mse(%w, %t) : f32[] fwd  # loss
  output loss = %0
)";
  ir::Graph g = testing::parseOrFail(ok);
  passes::Autodiff autodiff;
  REQUIRE(autodiff.run(g).ok());
  Expected<bool> again = autodiff.run(g);
  REQUIRE_FALSE(again.ok());
  CHECK(contains(again.error().message, "already has bwd nodes"));
  CHECK(contains(again.error().message, "autodiff runs once"));
}

TEST_CASE("autodiff errors: an op without a gradient rule on the path names the op and the node") {
  std::string in = R"(graph g
  input %t : f32[4]
  param %w : f32[4]
  %0 = relu_backward(%w, %w) : f32[4] fwd  # odd
  %1 = mse(%0, %t) : f32[] fwd  # loss
  output loss = %1
)";
  std::string message = autodiffError(in);
  CHECK(contains(message, "op 'relu_backward' has no gradient rule"));
  CHECK(contains(message, "'%0 = relu_backward(%w, %w) : f32[4] fwd  # odd'"));
}

TEST_CASE("autodiff errors: a loss that depends on layer_norm's statistics is reported, not ignored") {
  std::string bad = R"(graph g
  input %t : f32[2, 1]
  param %x : f32[2, 4]
  param %w : f32[4]
  param %b : f32[4]
  %0, %1, %2 = layer_norm(%x, %w, %b) {eps = 1e-05} : f32[2, 4], f32[2, 1], f32[2, 1] fwd  # ln
  %3 = mse(%1, %t) : f32[] fwd  # loss
  output loss = %3
)";
  std::string message = autodiffError(bad);
  CHECK(contains(message, "cannot differentiate '%0, %1, %2 = layer_norm("));
  CHECK(contains(message, "mean or rstd"));
}
