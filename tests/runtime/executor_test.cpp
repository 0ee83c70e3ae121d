// The executor on small hand-written graphs: outputs, input/state checking, freeing of
// intermediates, in-place optimizer updates, kernel errors.
#include <torch/torch.h>

#include <string>

#include "ir/parser.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's and abort
// instead of recording the failure.
#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;
namespace F = torch::nn::functional;

namespace {

ir::Graph parse(const std::string& text) {
  Expected<ir::Graph> g = ir::parseGraph(text, "test.gir");
  if (!g) FAIL(g.error().message);
  return std::move(g).value();
}

Executor makeExecutor(const ir::Graph& g) {
  Expected<Executor> e = Executor::create(g);
  if (!e) FAIL(e.error().message);
  return std::move(e).value();
}

const char* kMlp = R"(graph mlp
  input %x : f32[4, 8]
  input %y : f32[4, 2]
  param %fc1.weight : f32[16, 8] {init = "normal", std = 0.1}
  param %fc1.bias : f32[16] {init = "zeros"}
  param %fc2.weight : f32[2, 16] {init = "normal", std = 0.1}
  %0 = linear(%x, %fc1.weight, %fc1.bias) : f32[4, 16] fwd  # fc1
  %1 = relu(%0) : f32[4, 16] fwd  # act
  %2 = linear(%1, %fc2.weight) : f32[4, 2] fwd  # fc2
  %3 = mse(%2, %y) : f32[] fwd  # loss
  output loss = %3
  output pred = %2
  output w2 = %fc2.weight
)";

TensorMap mlpState() {
  torch::manual_seed(30);
  return {{"fc1.weight", torch::randn({16, 8})}, {"fc1.bias", torch::randn({16})}, {"fc2.weight", torch::randn({2, 16})}};
}

}  // namespace

TEST_CASE("executor: runs a graph and returns its outputs by name") {
  ir::Graph g = parse(kMlp);
  Executor exec = makeExecutor(g);
  TensorMap state = mlpState();
  at::Tensor x = torch::randn({4, 8}), y = torch::randn({4, 2});
  Expected<TensorMap> out = exec.run({{"x", x}, {"y", y}}, state, {});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  REQUIRE(out->size() == 3);
  at::Tensor pred = F::linear(torch::relu(F::linear(x, state["fc1.weight"], state["fc1.bias"])), state["fc2.weight"]);
  // Products of 4 rows run on the host's tile kernels (runtime/kernels/host_products.h): equal
  // to ATen's BLAS product up to f32 rounding; the loss is ATen's kernel on them.
  CHECK(torch::allclose(out->at("pred"), pred, 1e-5, 1e-6));
  CHECK(torch::equal(out->at("loss"), F::mse_loss(out->at("pred"), y)));
  // An output that is a parameter is the state tensor itself.
  CHECK(out->at("w2").is_same(state["fc2.weight"]));
  CHECK(&exec.graph() == &g);
}

TEST_CASE("executor: missing and mistyped inputs and parameters are reported by name") {
  ir::Graph g = parse(kMlp);
  Executor exec = makeExecutor(g);
  TensorMap state = mlpState();
  at::Tensor y = torch::randn({4, 2});

  Expected<TensorMap> missing = exec.run({{"y", y}}, state, {});
  REQUIRE(!missing.ok());
  CHECK(missing.error().message == "input 'x' (f32[4, 8]) is missing");

  Expected<TensorMap> shape = exec.run({{"x", torch::randn({4, 9})}, {"y", y}}, state, {});
  REQUIRE(!shape.ok());
  CHECK(shape.error().message == "input 'x': expected f32[4, 8], got f32[4, 9]");

  Expected<TensorMap> dtype = exec.run({{"x", torch::randn({4, 8}, torch::kDouble)}, {"y", y}}, state, {});
  REQUIRE(!dtype.ok());
  CHECK(dtype.error().message == "input 'x': expected f32[4, 8], got f64[4, 8]");

  Expected<TensorMap> undefined = exec.run({{"x", at::Tensor()}, {"y", y}}, state, {});
  REQUIRE(!undefined.ok());
  CHECK(undefined.error().message == "input 'x': expected f32[4, 8], got an undefined tensor");

  TensorMap partial = state;
  partial.erase("fc1.bias");
  Expected<TensorMap> noParam = exec.run({{"x", torch::randn({4, 8})}, {"y", y}}, partial, {});
  REQUIRE(!noParam.ok());
  CHECK(noParam.error().message == "parameter 'fc1.bias' (f32[16]) is missing");

  TensorMap wrong = state;
  wrong["fc2.weight"] = torch::randn({16, 2});
  Expected<TensorMap> badParam = exec.run({{"x", torch::randn({4, 8})}, {"y", y}}, wrong, {});
  REQUIRE(!badParam.ok());
  CHECK(badParam.error().message == "parameter 'fc2.weight': expected f32[2, 16], got f32[16, 2]");

  // Extra entries are ignored.
  Expected<TensorMap> extra = exec.run({{"x", torch::randn({4, 8})}, {"y", y}, {"unused", torch::zeros({1})}}, state, {});
  CHECK(extra.ok());
}

TEST_CASE("executor: a kernel failure names the node") {
  ir::Graph g = parse(R"(graph lookup
  input %idx : i64[3]
  param %table : f32[5, 2] {init = "zeros"}
  %0 = embedding(%table, %idx) : f32[3, 2] fwd  # wte
  output out = %0
)");
  Executor exec = makeExecutor(g);
  TensorMap state{{"table", torch::randn({5, 2})}};
  Expected<TensorMap> bad = exec.run({{"idx", torch::tensor({0, 7, 1}, torch::kLong)}}, state, {});
  REQUIRE(!bad.ok());
  INFO(bad.error().message);
  CHECK(bad.error().message.rfind("at '%0 = embedding(%table, %idx) : f32[3, 2] fwd  # wte': kernel 'embedding' failed:", 0) == 0);
  CHECK(exec.run({{"idx", torch::tensor({0, 4, 1}, torch::kLong)}}, state, {}).ok());
}

TEST_CASE("executor: intermediates are freed after their last use") {
  REQUIRE(MemoryTracker::install());
  // A chain of 10 elementwise ops on 4 MiB tensors. With release after last use at most two
  // chain tensors are alive at once (an operand and the result being written); without it,
  // all ten would be.
  std::string text = "graph chain\n  input %x : f32[1024, 1024]\n";
  std::string prev = "%x";
  for (int i = 0; i < 10; ++i) {
    text += "  %" + std::to_string(i) + " = scale(" + prev + ") {factor = 1.5} : f32[1024, 1024] fwd\n";
    prev = "%" + std::to_string(i);
  }
  text += "  output out = %9\n";
  ir::Graph g = parse(text);
  Executor exec = makeExecutor(g);
  at::Tensor x = torch::ones({1024, 1024});
  TensorMap state;
  const std::int64_t tensorBytes = 1024 * 1024 * 4;
  MemoryTracker::resetPeak();
  const std::int64_t before = MemoryTracker::currentBytes();
  Expected<TensorMap> out = exec.run({{"x", x}}, state, {});
  REQUIRE(out.ok());
  const std::int64_t peak = MemoryTracker::peakBytes() - before;
  MESSAGE("chain of 10: peak " << peak << " bytes above the input, " << static_cast<double>(peak) / tensorBytes
                               << " tensors");
  CHECK(peak <= 2 * tensorBytes + 4096);
  // Only the output is still alive.
  CHECK(MemoryTracker::currentBytes() - before == tensorBytes);
  CHECK(out->at("out").allclose(x * std::pow(1.5, 10)));
}

TEST_CASE("executor: optimizer ops update the state in place") {
  ir::Graph g = parse(R"(graph train
  input %x : f32[4, 8]
  input %y : f32[4, 2]
  input %lr : f32[]
  param %w : f32[2, 8] {init = "normal", std = 0.1}
  param %w.momentum : f32[2, 8] {init = "zeros"}
  %0 = linear(%x, %w) : f32[4, 2] fwd  # fc
  %1 = mse(%0, %y) : f32[] fwd  # loss
  %2 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd
  %3 = mse_backward(%2, %0, %y) : f32[4, 2] bwd  # loss
  %4 = linear_weight_grad(%3, %x) : f32[2, 8] bwd  # fc
  %5 = global_norm(%4) : f32[] opt
  %6 = clip_coef(%5) {max_norm = 1000.0} : f32[] opt
  sgd_step(%w, %4, %lr, %6, %w.momentum) {momentum = 0.9, weight_decay = 0.0} : () opt  # fc
  output loss = %1
)");
  Executor exec = makeExecutor(g);
  torch::manual_seed(31);
  at::Tensor w0 = torch::randn({2, 8});
  TensorMap state{{"w", w0.clone()}, {"w.momentum", torch::zeros({2, 8})}};
  const void* wData = state["w"].data_ptr();
  at::Tensor x = torch::randn({4, 8}), y = torch::randn({4, 2});

  // Reference: autograd gradient, then PyTorch's SGD update (momentum buffer = grad at step 1).
  at::Tensor w = w0.clone().requires_grad_(true);
  at::Tensor loss = F::mse_loss(F::linear(x, w), y);
  at::Tensor grad = torch::autograd::grad({loss}, {w})[0];
  double coef = std::min(1.0, 1000.0 / (grad.norm().item<double>() + 1e-6));
  CHECK(coef == 1.0);
  at::Tensor expected = w0 - 0.5 * grad;

  Expected<TensorMap> out = exec.run({{"x", x}, {"y", y}, {"lr", torch::scalar_tensor(0.5)}}, state, {});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  CHECK(out->at("loss").item<float>() == doctest::Approx(loss.item<float>()));
  CHECK(state["w"].data_ptr() == wData);
  CHECK(state["w"].allclose(expected, 1e-6, 1e-7));
  CHECK(state["w.momentum"].allclose(grad, 1e-6, 1e-7));
}

TEST_CASE("executor: unused results, dropout keyed by the run context, node hook") {
  ir::Graph g = parse(R"(graph ln
  input %x : f32[8, 32]
  param %ln.weight : f32[32] {init = "ones"}
  param %ln.bias : f32[32] {init = "zeros"}
  %0, %1, %2 = layer_norm(%x, %ln.weight, %ln.bias) {eps = 1e-05} : f32[8, 32], f32[8, 1], f32[8, 1] fwd  # ln
  %3 = dropout(%0) {p = 0.5, rng = 3} : f32[8, 32] fwd  # drop
  output y = %3
)");
  Executor exec = makeExecutor(g);
  int calls = 0;
  exec.setNodeHook([&](const ir::Node&, std::chrono::nanoseconds elapsed) {
    ++calls;
    CHECK(elapsed.count() >= 0);
  });
  TensorMap state{{"ln.weight", torch::ones({32})}, {"ln.bias", torch::zeros({32})}};
  at::Tensor x = torch::randn({8, 32});
  auto run = [&](RunContext ctx) {
    Expected<TensorMap> out = exec.run({{"x", x}}, state, ctx);
    REQUIRE(out.ok());
    return out->at("y");
  };
  at::Tensor a = run({.seed = 1, .step = 1});
  CHECK(calls == 2);
  CHECK(torch::equal(a, run({.seed = 1, .step = 1})));
  CHECK(!torch::equal(a, run({.seed = 1, .step = 2})));
  CHECK(!torch::equal(a, run({.seed = 2, .step = 1})));
}

TEST_CASE("executor: create rejects graphs that do not verify") {
  ir::Graph g("broken");
  ir::Value* x = g.addInput("x", {ir::DType::f32, {2}});
  ir::Value* operands[] = {x};
  // A result type the op table would not infer.
  ir::Node* node = g.createUnchecked(*ir::findOp("relu"), operands, {}, {{ir::DType::f32, {3}}}, ir::Phase::fwd, "act");
  g.setOutput("out", node->result());
  Expected<Executor> e = Executor::create(g);
  REQUIRE(!e.ok());
  INFO(e.error().message);
  CHECK(e.error().message.rfind("cannot execute graph 'broken': ", 0) == 0);
}
