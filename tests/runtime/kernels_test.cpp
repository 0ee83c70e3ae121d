// Forward kernels against LibTorch, and coverage of the kernel table.
//
// Every kernel runs through runtime::callOp, which infers the IR result types from the
// operands and checks the kernel's results against them (dtype and shape), exactly as the
// executor does. Each comparison prints the op's max abs and max rel error; "rel" is
// max|ours - ref| / max|ref|. Pass criterion per element: |ours - ref| <= atol + rtol * |ref|.
// Tolerances: data movement and ops that call the very ATen kernel PyTorch calls are
// expected exact (atol = rtol = 0); ops compared with an independent formula use fp32
// tolerances (atol 1e-6, rtol 1e-5).
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <set>
#include <string>

#include "ir/op_table.h"
#include "runtime/exec/executor.h"
#include "runtime/kernels/kernels.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's and abort
// instead of recording the failure.
#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;
namespace F = torch::nn::functional;

namespace {

std::vector<at::Tensor> run(std::string_view op, std::vector<at::Tensor> operands, ir::AttrMap attrs = {},
                            RunContext ctx = {}) {
  Expected<std::vector<at::Tensor>> r = callOp(op, operands, attrs, ctx);
  if (!r) FAIL(r.error().message);
  return *r;
}

at::Tensor run1(std::string_view op, std::vector<at::Tensor> operands, ir::AttrMap attrs = {}) {
  std::vector<at::Tensor> r = run(op, std::move(operands), std::move(attrs));
  REQUIRE(r.size() == 1);
  return r[0];
}

// Prints the errors and checks |ours - ref| <= atol + rtol * |ref| elementwise.
void expectClose(const std::string& what, const at::Tensor& ours, const at::Tensor& ref, double atol, double rtol) {
  REQUIRE_MESSAGE((ours.sizes() == ref.sizes()), what);
  REQUIRE_MESSAGE((ours.scalar_type() == ref.scalar_type()), what);
  at::Tensor a = ours.to(at::kDouble), b = ref.to(at::kDouble);
  // Infinities (causal masks) must match exactly; compare the finite rest.
  at::Tensor inf = b.isinf();
  CHECK_MESSAGE(torch::equal(a.masked_select(inf), b.masked_select(inf)), what);
  at::Tensor diff = (a - b).masked_fill(inf, 0).abs();
  double maxAbs = diff.numel() ? diff.max().item<double>() : 0.0;
  double refMax = b.masked_fill(inf, 0).abs().max().item<double>();
  double maxRel = refMax > 0 ? maxAbs / refMax : maxAbs;
  MESSAGE(what << ": max abs err " << maxAbs << ", max rel err " << maxRel << " (atol " << atol << ", rtol " << rtol
               << ")");
  bool ok = (diff <= atol + rtol * b.masked_fill(inf, 0).abs()).all().item<bool>();
  CHECK_MESSAGE(ok, what << " exceeds the tolerance");
}

void expectExact(const std::string& what, const at::Tensor& ours, const at::Tensor& ref) {
  expectClose(what, ours, ref, 0.0, 0.0);
}

}  // namespace

TEST_CASE("every op in the op table has a kernel") {
  for (const ir::OpInfo& op : ir::allOps()) CHECK_MESSAGE(findKernel(op.name) != nullptr, "no kernel for " << op.name);
  // And no kernel is registered for an op the table does not know.
  for (auto part : {forwardKernels(), backwardKernels(), optimizerKernels()})
    for (const KernelEntry& e : part) CHECK_MESSAGE(ir::findOp(e.op) != nullptr, "kernel for unknown op " << e.op);
}

TEST_CASE("forward parity: elementwise and broadcasting") {
  torch::manual_seed(0);
  at::Tensor a = torch::randn({4, 1, 6}), b = torch::randn({5, 6});
  expectExact("add", run1("add", {a, b}), a + b);
  expectExact("sub", run1("sub", {a, b}), a - b);
  expectExact("mul", run1("mul", {a, b}), a * b);
  expectExact("scale", run1("scale", {a}, {{"factor", 0.37}}), a * 0.37);
  at::Tensor x = torch::randn({3, 7, 5}) * 3;
  expectExact("relu", run1("relu", {x}), torch::relu(x));
  expectExact("tanh", run1("tanh", {x}), torch::tanh(x));
  expectExact("sigmoid", run1("sigmoid", {x}), torch::sigmoid(x));
  // The exact gelu of contiguous f32 runs the host's own loops (runtime/kernels/kernels_gelu.cpp).
  expectClose("gelu (default)", run1("gelu", {x}), F::gelu(x), 1e-6, 1e-5);
  expectClose("gelu none", run1("gelu", {x}, {{"approximate", std::string("none")}}),
              F::gelu(x, F::GELUFuncOptions().approximate("none")), 1e-6, 1e-5);
  expectExact("gelu tanh", run1("gelu", {x}, {{"approximate", std::string("tanh")}}),
              F::gelu(x, F::GELUFuncOptions().approximate("tanh")));
  // Independent formulas, fp32 tolerance.
  at::Tensor xd = x.to(at::kDouble);
  expectClose("gelu none vs erf formula", run1("gelu", {x}), (xd * 0.5 * (1 + torch::erf(xd / std::sqrt(2.0)))).to(at::kFloat),
              1e-6, 1e-5);
  at::Tensor inner = std::sqrt(2.0 / std::numbers::pi) * (xd + 0.044715 * xd.pow(3));
  expectClose("gelu tanh vs formula", run1("gelu", {x}, {{"approximate", std::string("tanh")}}),
              (0.5 * xd * (1 + torch::tanh(inner))).to(at::kFloat), 1e-6, 1e-5);
  expectClose("sigmoid vs formula", run1("sigmoid", {x}), (1 / (1 + torch::exp(-xd))).to(at::kFloat), 1e-6, 1e-5);
}

TEST_CASE("forward parity: matmul and linear") {
  torch::manual_seed(1);
  at::Tensor a = torch::randn({2, 1, 4, 5}), b = torch::randn({3, 5, 6});
  at::Tensor ours = run1("matmul", {a, b});
  CHECK((ours.sizes() == at::IntArrayRef({2, 3, 4, 6})));
  expectExact("matmul (batch broadcast)", ours, torch::matmul(a, b));
  expectClose("matmul vs f64", ours, torch::matmul(a.to(at::kDouble), b.to(at::kDouble)).to(at::kFloat), 1e-6, 1e-5);
  at::Tensor x = torch::randn({2, 3, 8}), w = torch::randn({5, 8}), bias = torch::randn({5});
  // Few rows: the host runs its tile kernels (runtime/kernels/host_products.h), not ATen's BLAS call.
  expectClose("linear", run1("linear", {x, w, bias}), F::linear(x, w, bias), 1e-6, 1e-5);
  expectClose("linear (no bias)", run1("linear", {x, w}), F::linear(x, w), 1e-6, 1e-5);
  at::Tensor ref = (torch::matmul(x.to(at::kDouble), w.to(at::kDouble).t()) + bias.to(at::kDouble)).to(at::kFloat);
  expectClose("linear vs f64", run1("linear", {x, w, bias}), ref, 1e-6, 1e-5);
}

// Products over more rows than one block (runtime/kernels/row_blocked_products.h: 1024 rows) run block
// by block; the result is the whole product's within rounding (f32 against f64: 1e-5 absolute
// and relative, the sums of 24 products reaching about 25 in magnitude; f64: 1e-12), the last
// block short (2,085 = 2 x 1024 + 37 rows).
TEST_CASE("forward parity: matmul and linear over more rows than one product block") {
  torch::manual_seed(2);
  for (at::ScalarType type : {at::kFloat, at::kDouble}) {
    const bool f64 = type == at::kDouble;
    const double atol = f64 ? 1e-12 : 1e-5, rtol = f64 ? 1e-12 : 1e-5;
    at::Tensor x = torch::randn({5, 417, 24}, type), w = torch::randn({40, 24}, type), bias = torch::randn({40}, type);
    const std::string t = f64 ? " f64" : " f32";
    auto ref = [&](const at::Tensor& r) { return r.to(type); };
    at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble), bd = bias.to(at::kDouble);
    expectClose("linear, 2085 rows" + t, run1("linear", {x, w, bias}), ref(torch::matmul(xd, wd.t()) + bd), atol, rtol);
    expectClose("linear (no bias), 2085 rows" + t, run1("linear", {x, w}), ref(torch::matmul(xd, wd.t())), atol, rtol);
    at::Tensor g = torch::randn({5, 417, 40}, type);
    expectClose("matmul x @ W, 2085 rows" + t, run1("matmul", {g, w}), ref(torch::matmul(g.to(at::kDouble), wd)), atol,
                rtol);
    // A strided x keeps ATen's matmul (its copy is the planner's): the same values.
    at::Tensor gt = torch::randn({5, 40, 417}, type).transpose(1, 2);
    expectClose("matmul strided x @ W, 2085 rows" + t, run1("matmul", {gt, w}),
                ref(torch::matmul(gt.to(at::kDouble), wd)), atol, rtol);
  }
}

TEST_CASE("forward parity: softmax, log_softmax, layer_norm") {
  torch::manual_seed(2);
  at::Tensor x = torch::randn({3, 4, 9}) * 4;
  for (std::int64_t dim : {-1, 1, 0}) {
    std::string d = " dim " + std::to_string(dim);
    // Over the last axis the host runs its own rows (runtime/kernels/kernels_softmax.cpp): another
    // exp and summation order than ATen's; over other axes ATen's kernel itself.
    const double tol = dim == -1 ? 1e-6 : 0.0;
    expectClose("softmax" + d, run1("softmax", {x}, {{"dim", dim}}), torch::softmax(x, dim), tol, tol);
    expectClose("log_softmax" + d, run1("log_softmax", {x}, {{"dim", dim}}), torch::log_softmax(x, dim), tol, tol);
    at::Tensor xd = x.to(at::kDouble);
    expectClose("softmax vs f64" + d, run1("softmax", {x}, {{"dim", dim}}), torch::softmax(xd, dim).to(at::kFloat), 1e-6,
                1e-5);
  }

  at::Tensor w = torch::randn({9}), b = torch::randn({9});
  std::vector<at::Tensor> r = run("layer_norm", {x, w, b}, {{"eps", 1e-5}});
  REQUIRE(r.size() == 3);
  // The host's own rows (runtime/kernels/kernels_layer_norm.cpp) sum in another order than ATen.
  expectClose("layer_norm y", r[0], F::layer_norm(x, F::LayerNormFuncOptions({9}).weight(w).bias(b).eps(1e-5)), 1e-6,
              1e-5);
  at::Tensor xd = x.to(at::kDouble);
  at::Tensor mean = xd.mean(-1, true);
  at::Tensor rstd = 1.0 / torch::sqrt(xd.var(-1, /*unbiased=*/false, /*keepdim=*/true) + 1e-5);
  expectClose("layer_norm mean", r[1], mean.to(at::kFloat), 1e-6, 1e-5);
  expectClose("layer_norm rstd", r[2], rstd.to(at::kFloat), 1e-6, 1e-5);
  expectClose("layer_norm y vs f64", r[0],
              ((xd - mean) * rstd * w.to(at::kDouble) + b.to(at::kDouble)).to(at::kFloat), 1e-6, 1e-5);
}

// The host's layer norm rows: widths with and without a tail beyond the 16-lane blocks, f32
// within 1e-5 and f64 within 1e-12 of ATen's kernel, on one intra-op thread and on two.
TEST_CASE("forward parity: the host's layer norm, f32 and f64, one and two threads") {
  torch::manual_seed(4);
  const int threadsBefore = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (std::int64_t d : {256, 37}) {
      for (at::ScalarType t : {at::kFloat, at::kDouble}) {
        const at::Tensor x = (torch::randn({2, 300, d}) * 3 + 1).to(t), w = torch::randn({d}).to(t),
                         b = torch::randn({d}).to(t);
        std::vector<at::Tensor> r = run("layer_norm", {x, w, b}, {{"eps", 1e-5}});
        const auto [y, mean, rstd] = at::native_layer_norm(x, {d}, w, b, 1e-5);
        const double tol = t == at::kFloat ? 1e-5 : 1e-12;
        const std::string what = "layer_norm d " + std::to_string(d) + (t == at::kFloat ? " f32" : " f64") + ", " +
                                 std::to_string(threads) + " threads";
        expectClose(what + " y", r[0], y, tol, tol);
        expectClose(what + " mean", r[1], mean.view(r[1].sizes()), tol, tol);
        expectClose(what + " rstd", r[2], rstd.view(r[2].sizes()), tol, tol);
      }
    }
  }
  at::set_num_threads(threadsBefore);
}

// The host's softmax rows, forward and backward: rows with and without a tail beyond the
// 16-lane blocks, masked (-inf) scores as a causal mask leaves them, f32 within 1e-5 and f64
// within 1e-12 of ATen's kernels, on one intra-op thread and on two.
TEST_CASE("forward and backward parity: the host's softmax and log_softmax rows") {
  torch::manual_seed(6);
  const int threadsBefore = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (std::int64_t d : {128, 37}) {
      for (at::ScalarType t : {at::kFloat, at::kDouble}) {
        at::Tensor x = (torch::randn({3, 40, d}) * 5).to(t);
        x.masked_fill_(torch::ones({40, d}, at::kBool).triu_(1), -std::numeric_limits<double>::infinity());
        const at::Tensor g = torch::randn({3, 40, d}).to(t);
        const double tol = t == at::kFloat ? 1e-5 : 1e-12;
        const std::string what = "d " + std::to_string(d) + (t == at::kFloat ? " f32" : " f64") + ", " +
                                 std::to_string(threads) + " threads";
        const ir::AttrMap last{{"dim", std::int64_t{-1}}};
        const at::Tensor y = run1("softmax", {x}, last), ly = run1("log_softmax", {x}, last);
        expectClose("softmax " + what, y, at::_softmax(x, -1, false), tol, tol);
        expectClose("log_softmax " + what, ly, at::_log_softmax(x, -1, false), tol, tol);
        expectClose("softmax_backward " + what, run1("softmax_backward", {g, y}, last),
                    at::_softmax_backward_data(g, y, -1, t), tol, tol);
        expectClose("log_softmax_backward " + what, run1("log_softmax_backward", {g, ly}, last),
                    at::_log_softmax_backward_data(g, ly, -1, t), tol, tol);
      }
    }
  }
  at::set_num_threads(threadsBefore);
}

// The host's exact gelu loops (runtime/kernels/gelu_ops.h), forward and backward, on every
// f32 value step of 2.7e-4 over [-13, 14] (gelu's normal-f32 range; an odd count, so the last
// chunk is partial), on one intra-op thread and on two: the forward within 6e-7 relative of the
// f64 value from erfc (the negative tail included, where ATen's 1 + erf cancels), the backward
// within 1e-6 (absolute, with unit gradients; gelu' crosses zero); infinities and NaN as ATen
// gives them; a strided operand takes ATen's kernel.
TEST_CASE("forward and backward parity: the host's gelu loops") {
  const int threadsBefore = at::get_num_threads();
  const at::Tensor x = torch::linspace(-13.0, 14.0, 100003);
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor phi = 0.5 * torch::erfc(-xd / std::sqrt(2.0));
  const at::Tensor refForward = xd * phi;
  const at::Tensor refBackward = phi + xd * torch::exp(-0.5 * xd * xd) / std::sqrt(2.0 * std::numbers::pi);
  const at::Tensor ones = torch::ones_like(x);
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    const std::string what = std::to_string(threads) + " thread(s)";
    const at::Tensor y = run1("gelu", {x}).to(at::kDouble);
    const double worst = ((y - refForward).abs() / refForward.abs().clamp_min(1e-300)).max().item<double>();
    MESSAGE("gelu, " << what << ": max rel err " << worst);
    CHECK(worst <= 6e-7);
    expectClose("gelu_backward " + what, run1("gelu_backward", {ones, x}), refBackward.to(at::kFloat), 1e-6, 0);
  }
  at::set_num_threads(threadsBefore);

  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor special = torch::tensor({inf, -inf, nan, 0.0f, -0.0f, 20.0f, -20.0f, 1e-30f});
  const at::Tensor ours = run1("gelu", {special}), theirs = F::gelu(special);
  CHECK(torch::equal(ours.isnan(), theirs.isnan()));
  CHECK(torch::equal(ours.masked_fill(ours.isnan(), 0), theirs.masked_fill(theirs.isnan(), 0)));
  const at::Tensor g = torch::randn({8});
  const at::Tensor oursBack = run1("gelu_backward", {g, special}), theirsBack = at::gelu_backward(g, special);
  CHECK(torch::equal(oursBack.isnan(), theirsBack.isnan()));

  const at::Tensor strided = torch::randn({6, 10}).t();
  expectClose("gelu strided (ATen's kernel)", run1("gelu", {strided}), F::gelu(strided), 1e-6, 1e-5);
}

TEST_CASE("forward parity: causal_mask") {
  torch::manual_seed(3);
  for (auto [s, t] : {std::pair<std::int64_t, std::int64_t>{5, 5}, {3, 6}, {6, 3}}) {
    at::Tensor x = torch::randn({2, 3, s, t});
    at::Tensor ref = x.clone();
    auto acc = ref.accessor<float, 4>();
    for (int b = 0; b < 2; ++b)
      for (int h = 0; h < 3; ++h)
        for (std::int64_t i = 0; i < s; ++i)
          for (std::int64_t j = i + 1; j < t; ++j) acc[b][h][i][j] = -std::numeric_limits<float>::infinity();
    expectExact("causal_mask " + std::to_string(s) + "x" + std::to_string(t), run1("causal_mask", {x}), ref);
  }
}

TEST_CASE("forward parity: data movement is exact") {
  torch::manual_seed(4);
  at::Tensor x = torch::randn({4, 6, 8});
  expectExact("reshape", run1("reshape", {x}, {{"shape", std::vector<std::int64_t>{24, 8}}}), x.reshape({24, 8}));
  expectExact("transpose", run1("transpose", {x}, {{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{-1}}}),
              x.transpose(0, 2));
  expectExact("slice",
              run1("slice", {x}, {{"dim", std::int64_t{1}}, {"start", std::int64_t{2}}, {"end", std::int64_t{5}}}),
              x.slice(1, 2, 5));
  expectExact("select", run1("select", {x}, {{"dim", std::int64_t{-1}}, {"index", std::int64_t{3}}}), x.select(2, 3));
  std::vector<at::Tensor> parts = run("split", {x}, {{"dim", std::int64_t{1}}, {"sections", std::int64_t{3}}});
  REQUIRE(parts.size() == 3);
  for (int i = 0; i < 3; ++i) expectExact("split part " + std::to_string(i), parts[i], x.slice(1, 2 * i, 2 * i + 2));
  std::vector<at::Tensor> steps = run("unbind", {x}, {{"dim", std::int64_t{1}}});
  REQUIRE(steps.size() == 6);
  for (int i = 0; i < 6; ++i) expectExact("unbind part " + std::to_string(i), steps[i], x.select(1, i));
  at::Tensor y = torch::randn({4, 6, 8}), z = torch::randn({4, 6, 8});
  expectExact("stack dim 1", run1("stack", {x, y, z}, {{"dim", std::int64_t{1}}}), torch::stack({x, y, z}, 1));
  expectExact("stack dim -1", run1("stack", {x, y}, {{"dim", std::int64_t{-1}}}), torch::stack({x, y}, 3));
  expectExact("zeros", run1("zeros", {}, {{"shape", std::vector<std::int64_t>{3, 2}}, {"dtype", ir::DType::f32}}),
              torch::zeros({3, 2}));
  at::Tensor zi = run1("zeros", {}, {{"shape", std::vector<std::int64_t>{5}}, {"dtype", ir::DType::i64}});
  CHECK((zi.scalar_type() == at::kLong));

  at::Tensor weight = torch::randn({10, 8});
  at::Tensor idx = torch::randint(0, 10, {3, 5}, torch::kLong);
  expectExact("embedding", run1("embedding", {weight, idx}), F::embedding(idx, weight));
  expectExact("embedding (i32 indices)", run1("embedding", {weight, idx.to(at::kInt)}), F::embedding(idx, weight));
}

TEST_CASE("forward parity: losses") {
  torch::manual_seed(5);
  at::Tensor logits = torch::randn({2, 7, 11}) * 3;
  at::Tensor target = torch::randint(0, 11, {2, 7}, torch::kLong);
  at::Tensor ours = run1("cross_entropy", {logits, target});
  CHECK(ours.dim() == 0);
  expectExact("cross_entropy (3-D)", ours, F::cross_entropy(logits.reshape({-1, 11}), target.reshape({-1})));
  at::Tensor lsm = torch::log_softmax(logits.to(at::kDouble), -1);
  at::Tensor ref = -lsm.gather(-1, target.unsqueeze(-1)).mean();
  expectClose("cross_entropy vs f64 formula", ours, ref.to(at::kFloat), 1e-6, 1e-5);
  expectExact("cross_entropy (i32 target)", run1("cross_entropy", {logits, target.to(at::kInt)}), ours);
  at::Tensor logits1 = torch::randn({11});
  at::Tensor target1 = torch::tensor(4, torch::kLong);
  expectClose("cross_entropy (1-D)", run1("cross_entropy", {logits1, target1}),
              -torch::log_softmax(logits1, 0)[4], 1e-6, 1e-5);

  // The IR op has no ignored class: a target outside [0, C) is an error (ATen's default
  // ignore_index of -100 would silently skip it).
  at::Tensor bad = target.clone();
  bad[0][0] = -100;
  CHECK(!callOp("cross_entropy", std::vector<at::Tensor>{logits, bad}).ok());
  CHECK(!callOp("cross_entropy_backward", std::vector<at::Tensor>{torch::tensor(1.0f), logits, bad}).ok());
  bad[0][0] = 11;
  CHECK(!callOp("cross_entropy", std::vector<at::Tensor>{logits, bad}).ok());

  at::Tensor input = torch::randn({3, 4, 5}), tgt = torch::randn({3, 4, 5});
  expectExact("mse", run1("mse", {input, tgt}), F::mse_loss(input, tgt));
  expectClose("mse vs f64 formula", run1("mse", {input, tgt}),
              (input.to(at::kDouble) - tgt.to(at::kDouble)).pow(2).mean().to(at::kFloat), 1e-6, 1e-5);
}

TEST_CASE("forward kernels return exactly the IR result types") {
  // callOp checks dtype and shape for every call above; here the same check rejects a wrong
  // result, so a kernel bug is reported at its node.
  ir::Graph g;
  ir::Value* x = g.addInput("x", {ir::DType::f32, {2, 3}});
  ir::Value* operands[] = {x};
  Expected<ir::Node*> node = g.create("relu", operands);
  REQUIRE(node.ok());
  at::Tensor good = torch::zeros({2, 3});
  CHECK(checkResults(**node, std::vector<at::Tensor>{good}).ok());
  Status wrongShape = checkResults(**node, std::vector<at::Tensor>{torch::zeros({3, 2})});
  REQUIRE(!wrongShape.ok());
  CHECK(wrongShape.message() == "kernel 'relu' result 0 is f32[3, 2], the IR type is f32[2, 3]");
  Status wrongDtype = checkResults(**node, std::vector<at::Tensor>{torch::zeros({2, 3}, torch::kDouble)});
  CHECK(wrongDtype.message() == "kernel 'relu' result 0 is f64[2, 3], the IR type is f32[2, 3]");
  CHECK(!checkResults(**node, std::vector<at::Tensor>{}).ok());
}

TEST_CASE("callOp reports operands that do not fit the op") {
  Expected<std::vector<at::Tensor>> r = callOp("matmul", std::vector<at::Tensor>{torch::zeros({2, 3}), torch::zeros({4, 5})});
  REQUIRE(!r.ok());
  CHECK(r.error().message.find("inner dimensions differ") != std::string::npos);
  Expected<std::vector<at::Tensor>> unknown = callOp("frobnicate", std::vector<at::Tensor>{});
  REQUIRE(!unknown.ok());
  CHECK(unknown.error().message == "no kernel for op 'frobnicate' on cpu");
}
