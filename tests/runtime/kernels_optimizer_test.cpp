// Optimizer kernels against torch::optim (LibTorch's SGD and AdamW, which implement
// torch.optim.SGD / AdamW), the gradient-norm ops, and the learning-rate schedule.
//
// Tolerance: 1e-6 relative per element after every step (reported: max abs and max rel err,
// rel = max|ours - torch| / max|torch|). With a learning rate exactly representable in f32
// the trajectories must be bit-identical, because the kernels issue the same ATen calls in
// the same order. With lr = 0.01 passed as an f32[] scalar (as lr_schedule produces it) the
// lr differs from PyTorch's double by up to half an f32 ulp; ATen rounds scalar factors to
// f32 for f32 tensors anyway, so those runs are usually bit-identical too, but only the
// tolerance is required.
#include <torch/torch.h>

#include <cmath>
#include <numbers>
#include <string>

#include "ir/parser.h"
#include "runtime/exec/executor.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's and abort
// instead of recording the failure.
#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;

namespace {

double maxRelErr(const at::Tensor& ours, const at::Tensor& ref) {
  at::Tensor d = (ours.to(at::kDouble) - ref.to(at::kDouble)).abs();
  return d.max().item<double>() / ref.to(at::kDouble).abs().max().item<double>();
}

void expectStep(const std::string& what, const at::Tensor& ours, const at::Tensor& ref, bool exact) {
  double absErr = (ours.to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>();
  double relErr = maxRelErr(ours, ref);
  MESSAGE(what << ": max abs err " << absErr << ", max rel err " << relErr);
  if (exact) CHECK_MESSAGE(torch::equal(ours, ref), what << " is not bit-identical");
  CHECK_MESSAGE(relErr <= 1e-6, what);
}

void call(std::string_view op, std::vector<at::Tensor> operands, const ir::AttrMap& attrs) {
  Expected<std::vector<at::Tensor>> r = callOp(op, operands, attrs);
  if (!r) FAIL(r.error().message);
  CHECK(r->empty());
}

at::Tensor f32(double v) { return torch::scalar_tensor(v, torch::kFloat); }
at::Tensor i64(std::int64_t v) { return torch::scalar_tensor(v, torch::kLong); }

struct SgdCase {
  double lr;
  double momentum;
  double weightDecay;
  double gradScale;
  bool exact;
};

void checkSgd(const SgdCase& c) {
  torch::manual_seed(20);
  at::Tensor p0 = torch::randn({5, 7});
  std::vector<at::Tensor> grads{torch::randn({5, 7}), torch::randn({5, 7}), torch::randn({5, 7})};

  at::Tensor p = p0.clone().requires_grad_(true);
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weightDecay));
  at::Tensor param = p0.clone(), buf = torch::zeros({5, 7});
  const void* data = param.data_ptr();
  for (int step = 1; step <= 3; ++step) {
    at::Tensor g = grads[step - 1];
    p.mutable_grad() = c.gradScale == 1.0 ? g.clone() : g * c.gradScale;
    sgd.step();
    std::vector<at::Tensor> operands{param, g, f32(c.lr), f32(c.gradScale)};
    if (c.momentum != 0.0) operands.push_back(buf);
    call("sgd_step", operands, {{"momentum", c.momentum}, {"weight_decay", c.weightDecay}});
    expectStep("sgd step " + std::to_string(step) + " (lr " + std::to_string(c.lr) + ", momentum " +
                   std::to_string(c.momentum) + ", wd " + std::to_string(c.weightDecay) + ", scale " +
                   std::to_string(c.gradScale) + ")",
               param, p.detach(), c.exact);
  }
  CHECK(param.data_ptr() == data);  // updated in place
}

}  // namespace

TEST_CASE("sgd_step matches torch::optim::SGD over 3 steps") {
  checkSgd({.lr = 0.125, .momentum = 0.9, .weightDecay = 0.01, .gradScale = 1.0, .exact = true});
  checkSgd({.lr = 0.01, .momentum = 0.9, .weightDecay = 0.01, .gradScale = 1.0, .exact = false});
  checkSgd({.lr = 0.125, .momentum = 0.0, .weightDecay = 0.05, .gradScale = 1.0, .exact = true});
  checkSgd({.lr = 0.125, .momentum = 0.8, .weightDecay = 0.0, .gradScale = 0.5, .exact = true});
}

TEST_CASE("adamw_step matches torch::optim::AdamW over 3 steps") {
  for (double lr : {0.0078125, 0.01}) {
    torch::manual_seed(21);
    at::Tensor p0 = torch::randn({6, 4});
    std::vector<at::Tensor> grads{torch::randn({6, 4}), torch::randn({6, 4}) * 0.1, torch::randn({6, 4}) * 3};
    at::Tensor p = p0.clone().requires_grad_(true);
    torch::optim::AdamW adamw(
        {p}, torch::optim::AdamWOptions(lr).betas(std::make_tuple(0.9, 0.95)).eps(1e-8).weight_decay(0.1));
    at::Tensor param = p0.clone(), m = torch::zeros({6, 4}), v = torch::zeros({6, 4});
    const void* data = param.data_ptr();
    for (int step = 1; step <= 3; ++step) {
      p.mutable_grad() = grads[step - 1].clone();
      adamw.step();
      call("adamw_step", {param, grads[step - 1], m, v, f32(lr), i64(step), f32(1.0)},
           {{"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8}, {"weight_decay", 0.1}});
      expectStep("adamw step " + std::to_string(step) + " (lr " + std::to_string(lr) + ")", param, p.detach(),
                 lr == 0.0078125);
    }
    CHECK(param.data_ptr() == data);
  }
}

// Decay groups (gradc train --decay matrices --betas 0.9,0.99 --eps 1e-6): a matrix with weight
// decay and a bias without, against torch::optim::AdamW with two parameter groups; the
// replicated updates and ZeRO's one sharded update of the same bucket (no_decay_parts), bit for
// bit (lr a power of two, as above).
TEST_CASE("adamw with two decay groups matches torch::optim::AdamW's parameter groups, replicated and sharded") {
  const double lr = 0.0078125;
  torch::manual_seed(24);
  const at::Tensor w0 = torch::randn({6, 4}), b0 = torch::randn({4});
  std::vector<std::pair<at::Tensor, at::Tensor>> grads;
  for (int i = 0; i < 3; ++i) grads.emplace_back(torch::randn({6, 4}), torch::randn({4}));
  at::Tensor w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  const auto options = torch::optim::AdamWOptions(lr).betas(std::make_tuple(0.9, 0.99)).eps(1e-6);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{w}, std::make_unique<torch::optim::AdamWOptions>(
                                                      torch::optim::AdamWOptions(options).weight_decay(0.1)));
  groups.emplace_back(std::vector<at::Tensor>{b}, std::make_unique<torch::optim::AdamWOptions>(
                                                      torch::optim::AdamWOptions(options).weight_decay(0.0)));
  torch::optim::AdamW adamw(std::move(groups), options);

  at::Tensor W = w0.clone(), mW = torch::zeros({6, 4}), vW = torch::zeros({6, 4});
  at::Tensor B = b0.clone(), mB = torch::zeros({4}), vB = torch::zeros({4});
  at::Tensor sW = w0.clone(), sB = b0.clone(), m = torch::zeros({28}), v = torch::zeros({28});
  const ir::AttrMap hyper{{"beta1", 0.9}, {"beta2", 0.99}, {"eps", 1e-6}};
  ir::AttrMap decaying = hyper, notDecaying = hyper, sharded = hyper;
  decaying["weight_decay"] = 0.1;
  notDecaying["weight_decay"] = 0.0;
  sharded["weight_decay"] = 0.1;
  sharded["no_decay_parts"] = std::vector<std::int64_t>{1};
  sharded["parts"] = std::int64_t{2};
  sharded["offset"] = std::int64_t{0};
  sharded["shard"] = std::int64_t{28};
  for (int step = 1; step <= 3; ++step) {
    const auto& [gw, gb] = grads[static_cast<size_t>(step - 1)];
    w.mutable_grad() = gw.clone();
    b.mutable_grad() = gb.clone();
    adamw.step();
    call("adamw_step", {W, gw, mW, vW, f32(lr), i64(step), f32(1.0)}, decaying);
    call("adamw_step", {B, gb, mB, vB, f32(lr), i64(step), f32(1.0)}, notDecaying);
    const std::string what = "step " + std::to_string(step);
    expectStep("matrix, decayed, " + what, W, w.detach(), true);
    expectStep("bias, not decayed, " + what, B, b.detach(), true);
    // One rank's shard of the bucket [W, B] (a world of one: the whole bucket).
    const std::vector<at::Tensor> operands{sW, sB, gw, gb, m, v, f32(lr), i64(step), f32(1.0)};
    Expected<std::vector<at::Tensor>> shard = callOp("adamw_shard_step", operands, sharded);
    REQUIRE_MESSAGE(shard.ok(), (shard.ok() ? "" : shard.error().message));
    sW.copy_((*shard)[0].narrow(0, 0, 24).view({6, 4}));  // what the all-gather brings back
    sB.copy_((*shard)[0].narrow(0, 24, 4));
    expectStep("sharded matrix, " + what, sW, w.detach(), true);
    expectStep("sharded bias, " + what, sB, b.detach(), true);
  }
}

TEST_CASE("adamw_step applies the gradient scale") {
  torch::manual_seed(22);
  at::Tensor p0 = torch::randn({8}), g = torch::randn({8});
  at::Tensor a = p0.clone(), ma = torch::zeros({8}), va = torch::zeros({8});
  at::Tensor b = p0.clone(), mb = torch::zeros({8}), vb = torch::zeros({8});
  ir::AttrMap attrs{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}};
  at::Tensor ga = g.clone();
  call("adamw_step", {a, ga, ma, va, f32(0.001), i64(1), f32(0.25)}, attrs);
  call("adamw_step", {b, g * 0.25, mb, vb, f32(0.001), i64(1), f32(1.0)}, attrs);
  CHECK(torch::equal(a, b));
  CHECK(torch::equal(ma, mb));
  // As clip_grad_norm_, the scale is applied to the gradient in place (its last use).
  CHECK(torch::equal(ga, g * 0.25));
}

TEST_CASE("global_norm and clip_coef") {
  torch::manual_seed(23);
  at::Tensor a = torch::randn({5, 7}), b = torch::randn({13}), c = torch::randn({2, 3, 4});
  Expected<std::vector<at::Tensor>> norm = callOp("global_norm", std::vector<at::Tensor>{a, b, c});
  REQUIRE(norm.ok());
  at::Tensor ref = torch::sqrt(a.to(at::kDouble).pow(2).sum() + b.to(at::kDouble).pow(2).sum() +
                               c.to(at::kDouble).pow(2).sum());
  double rel = std::abs((*norm)[0].item<double>() - ref.item<double>()) / ref.item<double>();
  MESSAGE("global_norm: rel err " << rel);
  CHECK(((*norm)[0].scalar_type() == at::kFloat));
  CHECK(rel <= 1e-6);

  // torch.nn.utils.clip_grad_norm_ computes the same norm.
  std::vector<at::Tensor> leaves{a.clone().requires_grad_(true), b.clone().requires_grad_(true),
                                 c.clone().requires_grad_(true)};
  for (size_t i = 0; i < leaves.size(); ++i) leaves[i].mutable_grad() = std::vector<at::Tensor>{a, b, c}[i].clone();
  double torchNorm = torch::nn::utils::clip_grad_norm_(leaves, 1.0);
  CHECK(std::abs((*norm)[0].item<double>() - torchNorm) <= 1e-6 * torchNorm);

  auto coef = [](double n, double maxNorm) {
    Expected<std::vector<at::Tensor>> r = callOp("clip_coef", std::vector<at::Tensor>{f32(n)}, {{"max_norm", maxNorm}});
    REQUIRE(r.ok());
    return (*r)[0].item<double>();
  };
  CHECK(coef(10.0, 1.0) == doctest::Approx(1.0 / (10.0 + 1e-6)).epsilon(1e-6));
  CHECK(coef(0.5, 1.0) == 1.0);
  CHECK(coef(1.0, 1.0) == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(coef(1.0, 1.0) <= 1.0);
}

TEST_CASE("lr_schedule: linear warmup, cosine decay, floor") {
  const double lr = 1e-3, minLr = 1e-4;
  const std::int64_t total = 110;  // warmup 10 unless a call says otherwise
  auto lrAt = [&](std::int64_t step, std::int64_t w = 10) {
    Expected<std::vector<at::Tensor>> r =
        callOp("lr_schedule", std::vector<at::Tensor>{i64(step)},
               {{"lr", lr}, {"min_lr", minLr}, {"warmup_steps", w}, {"total_steps", total}});
    REQUIRE(r.ok());
    CHECK(((*r)[0].scalar_type() == at::kFloat));
    return (*r)[0].item<float>();
  };
  auto cosine = [&](double progress) { return minLr + 0.5 * (lr - minLr) * (1 + std::cos(std::numbers::pi * progress)); };
  CHECK(lrAt(1) == static_cast<float>(lr * 1 / 10));
  CHECK(lrAt(5) == static_cast<float>(lr * 5 / 10));
  CHECK(lrAt(10) == static_cast<float>(lr));
  CHECK(lrAt(11) == static_cast<float>(cosine(0.01)));
  CHECK(lrAt(60) == static_cast<float>(cosine(0.5)));
  CHECK(lrAt(60) == doctest::Approx(5.5e-4).epsilon(1e-6));
  CHECK(lrAt(110) == static_cast<float>(minLr));
  CHECK(lrAt(500) == static_cast<float>(minLr));  // progress is clamped to 1
  // No warmup: step 1 is already one step into the decay.
  CHECK(lrAt(1, 0) == static_cast<float>(minLr + 0.5 * (lr - minLr) * (1 + std::cos(std::numbers::pi / 110))));
  CHECK(lrAt(0, 0) == static_cast<float>(lr));  // no division by a zero warmup
}

// The one-pass AdamW (adamw_step {fused = true}, set by the fuse pass) against torch::optim::AdamW
// over 5 steps, f32 and f64, with weight decay and a gradient scale: the same arithmetic in one
// pass (rounding differs only where ATen contracts a multiply-add), and the gradient untouched.
TEST_CASE("adamw_step {fused = true}: one pass, PyTorch's AdamW to rounding") {
  for (at::ScalarType type : {at::kFloat, at::kDouble}) {
    torch::manual_seed(31);
    const auto opts = at::TensorOptions().dtype(type);
    at::Tensor p0 = torch::randn({257, 33}, opts);
    at::Tensor p = p0.clone().requires_grad_(true);
    // lr 2^-7: exact in the f32 scalar the graph passes it as, so both sides use the same lr.
    torch::optim::AdamW adamw({p}, torch::optim::AdamWOptions(0.0078125).betas(std::make_tuple(0.9, 0.95)).eps(1e-8).weight_decay(0.1));
    at::Tensor param = p0.clone(), m = torch::zeros_like(p0), v = torch::zeros_like(p0);
    for (int step = 1; step <= 5; ++step) {
      at::Tensor g = torch::randn({257, 33}, opts);
      p.mutable_grad() = g * 0.5;
      adamw.step();
      at::Tensor gCopy = g.clone();
      call("adamw_step", {param, g, m, v, f32(0.0078125), i64(step), f32(0.5)},
           {{"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8}, {"weight_decay", 0.1}, {"fused", true}});
      CHECK(torch::equal(g, gCopy));  // scaled in registers, not in place
      const double rtol = type == at::kFloat ? 1e-6 : 1e-14;
      at::Tensor diff = (param - p.detach()).abs().to(at::kDouble);
      // Relative to the parameter, with a floor of the update's own scale (lr): one rounding of
      // the update differs where ATen contracts a multiply-add.
      at::Tensor bound = rtol * (p.detach().abs().to(at::kDouble) + 0.0078125);
      const std::int64_t worst = diff.view(-1).argmax().item<std::int64_t>();
      MESSAGE("fused adamw " << (type == at::kFloat ? "f32" : "f64") << " step " << step << ": max abs diff "
                             << diff.max().item<double>() << " at a parameter of "
                             << p.detach().view(-1)[worst].item<double>());
      CHECK((diff <= bound).all().item<bool>());
    }
  }
}

// The optimizer's host-side scalars (learning rate, step, gradient scale) are read once per step,
// not once per parameter (runtime/core/step_scalars.h: on a GPU each read is a synchronisation), and
// the updates are the ones each kernel makes reading them itself.
TEST_CASE("an optimizer step over four parameters reads its three scalars once each") {
  std::string text = "graph opt\n  input %step : i64[]\n  input %lr : f32[]\n  input %gs : f32[]\n";
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    text += "  input %g" + n + " : f32[5]\n  param %p" + n + " : f32[5]\n  param %m" + n + " : f32[5]\n  param %v" + n +
            " : f32[5]\n";
  }
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    text += "  adamw_step(%p" + n + ", %g" + n + ", %m" + n + ", %v" + n +
            ", %lr, %step, %gs) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, weight_decay = 0.01} : () opt\n";
  }
  text += "  %0 = scale(%lr) {factor = 1.0} : f32[] opt\n  output lr_seen = %0\n";
  Expected<ir::Graph> graph = ir::parseGraph(text, "opt");
  REQUIRE_MESSAGE(graph.ok(), (graph.ok() ? "" : graph.error().message));
  Expected<Executor> exec = Executor::create(*graph);
  REQUIRE(exec.ok());

  torch::manual_seed(4);
  TensorMap inputs{{"step", at::full({}, 3, at::kLong)}, {"lr", at::full({}, 0.01f)}, {"gs", at::full({}, 0.5f)}};
  TensorMap state, reference;
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    inputs.emplace("g" + n, torch::randn({5}));
    for (const char* s : {"p", "m", "v"}) state.emplace(s + n, std::string(s) == "v" ? torch::rand({5}) : torch::randn({5}));
  }
  for (const auto& [name, t] : state) reference.emplace(name, t.clone());
  TensorMap grads;
  for (int i = 0; i < 4; ++i) grads.emplace("g" + std::to_string(i), inputs.at("g" + std::to_string(i)).clone());

  Expected<TensorMap> out = exec->run(inputs, state, RunContext{});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  CHECK(exec->scalarReads() == 3);
  const ir::AttrMap attrs{{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}};
  for (int i = 0; i < 4; ++i) {
    const std::string n = std::to_string(i);
    REQUIRE(callOp("adamw_step",
                   std::vector<at::Tensor>{reference.at("p" + n), grads.at("g" + n), reference.at("m" + n),
                                           reference.at("v" + n), inputs.at("lr"), inputs.at("step"), inputs.at("gs")},
                   attrs)
                .ok());
    for (const char* s : {"p", "m", "v"}) CHECK_MESSAGE(torch::equal(state.at(s + n), reference.at(s + n)), s << n);
  }
}
