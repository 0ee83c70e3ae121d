// Batch normalisation's state against LibTorch: the running statistics after several training
// steps (torch.nn.functional.batch_norm with training = true updates them in place), the batch
// counter, and evaluation with the running statistics (training = false).
//
// Tolerance (fp32): running mean and variance within 1e-6 relative (both accumulate in f64,
// then round); evaluation output within 1e-5 * max|torch| + 1e-6.
#include <torch/torch.h>

#include "runtime/exec/executor.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc;

namespace {

double relErr(const torch::Tensor& ours, const torch::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  return (ours - ref).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

}  // namespace

TEST_CASE("batch_norm + running_stats_update track torch's running statistics; batch_norm_inference its eval mode") {
  torch::manual_seed(3);
  const std::int64_t C = 5;
  const double momentum = 0.1, eps = 1e-5;
  torch::Tensor w = torch::randn({C}), b = torch::randn({C});
  // gradc's state and torch's: running mean zeros, variance ones, no batches seen.
  torch::Tensor mean = torch::zeros({C}), var = torch::ones({C}), tracked = torch::zeros({}, torch::kLong);
  torch::Tensor refMean = mean.clone(), refVar = var.clone();
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    torch::Tensor x = torch::randn({6, C, 3, 4}) * (1 + step) + step;
    Expected<std::vector<at::Tensor>> norm = runtime::callOp("batch_norm", std::vector<at::Tensor>{x, w, b}, {{"eps", eps}});
    REQUIRE_MESSAGE(norm.ok(), norm.error().message);
    Expected<std::vector<at::Tensor>> update = runtime::callOp(
        "running_stats_update", std::vector<at::Tensor>{mean, var, tracked, (*norm)[1], (*norm)[3]}, {{"momentum", momentum}});
    REQUIRE_MESSAGE(update.ok(), update.error().message);
    torch::Tensor y = torch::batch_norm(x, w, b, refMean, refVar, /*training=*/true, momentum, eps, false);
    CHECK(relErr((*norm)[0], y) < 1e-5);
    CHECK(relErr(mean, refMean) < 1e-6);
    CHECK(relErr(var, refVar) < 1e-6);
    CHECK(tracked.item<std::int64_t>() == step + 1);
  }
  CHECK_FALSE(torch::allclose(var, torch::ones({C})));  // the statistics moved
  torch::Tensor x = torch::randn({2, C, 3, 3});
  Expected<std::vector<at::Tensor>> eval =
      runtime::callOp("batch_norm_inference", std::vector<at::Tensor>{x, w, b, mean, var}, {{"eps", eps}});
  REQUIRE_MESSAGE(eval.ok(), eval.error().message);
  torch::Tensor ref = torch::batch_norm(x, w, b, refMean, refVar, /*training=*/false, momentum, eps, false);
  CHECK(relErr((*eval)[0], ref) < 1e-5);
}

TEST_CASE("momentum: null keeps the cumulative average of the batch statistics, as nn.BatchNorm2d(momentum=None)") {
  torch::manual_seed(5);
  const std::int64_t C = 4;
  torch::Tensor w = torch::ones({C}), b = torch::zeros({C});
  torch::Tensor mean = torch::zeros({C}), var = torch::ones({C}), tracked = torch::zeros({}, torch::kLong);
  torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(C).momentum(c10::nullopt));
  ref->train();
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    torch::Tensor x = torch::randn({3, C, 2, 5}) * (2 + step) - step;
    Expected<std::vector<at::Tensor>> norm = runtime::callOp("batch_norm", std::vector<at::Tensor>{x, w, b}, {{"eps", 1e-5}});
    REQUIRE(norm.ok());
    Expected<std::vector<at::Tensor>> update =
        runtime::callOp("running_stats_update", std::vector<at::Tensor>{mean, var, tracked, (*norm)[1], (*norm)[3]},
                        {{"momentum", 0.0}, {"cumulative", true}});
    REQUIRE_MESSAGE(update.ok(), update.error().message);
    {
      torch::NoGradGuard noGrad;
      ref->forward(x);
    }
    CHECK(relErr(mean, ref->running_mean) < 1e-6);
    CHECK(relErr(var, ref->running_var) < 1e-6);
    CHECK(tracked.item<std::int64_t>() == ref->num_batches_tracked.item<std::int64_t>());
  }
}

TEST_CASE("batch_norm in f64 matches torch to 1e-12") {
  torch::manual_seed(4);
  auto opts = torch::TensorOptions().dtype(torch::kDouble);
  torch::Tensor x = torch::randn({4, 3, 5}, opts), w = torch::randn({3}, opts), b = torch::randn({3}, opts);
  Expected<std::vector<at::Tensor>> norm = runtime::callOp("batch_norm", std::vector<at::Tensor>{x, w, b}, {{"eps", 1e-5}});
  REQUIRE(norm.ok());
  torch::Tensor y = torch::batch_norm(x, w, b, {}, {}, true, 0.1, 1e-5, false);
  CHECK(relErr((*norm)[0], y) < 1e-12);
}

// f32 runs on the host's vector loops (runtime/kernels/batch_norm_ops.h): values widened to f64
// and summed in 64 f64 lanes. Against torch's batch_norm and its autograd, on shapes that put
// planes on both sides of the 64-lane width (1, 7, 16, 100, 1024 elements), a mean far from
// zero (the variance's cancellation), and one and two threads. Tolerance: f32, 2e-5 of the
// largest reference value for y and the input gradient; 1e-5 relative for the weight and bias
// gradients and the statistics.
TEST_CASE("batch_norm f32 on the host's vector loops: forward, statistics and backward against torch autograd") {
  struct Shape {
    std::int64_t n, c, h, w;
    double offset, spread;
  };
  const Shape shapes[] = {{8, 16, 32, 32, 0, 1}, {32, 24, 4, 4, 0.5, 2}, {5, 7, 10, 10, 100, 0.5},
                          {3, 5, 7, 1, -3, 1},   {16, 6, 1, 1, 0, 1},    {2, 3, 33, 35, 1000, 1}};
  const int savedThreads = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const Shape& s : shapes) {
      CAPTURE(threads);
      CAPTURE(s.n);
      CAPTURE(s.c);
      CAPTURE(s.h);
      CAPTURE(s.w);
      torch::manual_seed(11);
      torch::Tensor x = (torch::randn({s.n, s.c, s.h, s.w}) * s.spread + s.offset).requires_grad_(true);
      torch::Tensor w = torch::randn({s.c}).requires_grad_(true), b = torch::randn({s.c}).requires_grad_(true);
      torch::Tensor g = torch::randn({s.n, s.c, s.h, s.w});
      torch::Tensor y = torch::batch_norm(x, w, b, {}, {}, true, 0.1, 1e-5, false);
      y.backward(g);
      torch::Tensor xd = x.detach();
      torch::Tensor refMean = xd.mean({0, 2, 3}), refVar = xd.to(torch::kDouble).var({0, 2, 3}, /*unbiased=*/true);
      Expected<std::vector<at::Tensor>> norm =
          runtime::callOp("batch_norm", std::vector<at::Tensor>{xd, w.detach(), b.detach()}, {{"eps", 1e-5}});
      REQUIRE_MESSAGE(norm.ok(), norm.error().message);
      CHECK(relErr((*norm)[0], y.detach()) < 2e-5);
      CHECK(((*norm)[1] - refMean).abs().max().item<double>() <= 1e-6 * (std::abs(s.offset) + s.spread));
      CHECK(relErr((*norm)[3].to(torch::kDouble), refVar) < 1e-5);
      Expected<std::vector<at::Tensor>> grads = runtime::callOp(
          "batch_norm_backward", std::vector<at::Tensor>{g, xd, (*norm)[1], (*norm)[2], w.detach()}, {});
      REQUIRE_MESSAGE(grads.ok(), grads.error().message);
      CHECK(relErr((*grads)[0], x.grad()) < 2e-5);
      CHECK(relErr((*grads)[1], w.grad()) < 1e-5);
      CHECK(relErr((*grads)[2], b.grad()) < 1e-5);
    }
  }
  at::set_num_threads(savedThreads);
}
