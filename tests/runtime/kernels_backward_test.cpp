// Backward kernels against LibTorch autograd.
//
// Each case builds the forward computation with requires_grad tensors, asks
// torch::autograd::grad for the gradients under a random upstream gradient, and compares our
// backward kernel(s) fed with the same upstream gradient and saved tensors. Errors are printed
// per gradient: max abs err, and max rel err = max|ours - autograd| / max|autograd|.
// Pass criterion per element: |ours - autograd| <= atol + rtol * |autograd|, with
// atol 1e-6 and rtol 1e-5 (fp32) unless a case states otherwise. Where our kernel is the
// ATen backward kernel autograd itself runs, the error is 0.
#include <torch/torch.h>

#include <limits>
#include <string>

#include "runtime/exec/executor.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's and abort
// instead of recording the failure.
#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;
namespace F = torch::nn::functional;

namespace {

constexpr double kAtol = 1e-6;
constexpr double kRtol = 1e-5;

std::vector<at::Tensor> run(std::string_view op, std::vector<at::Tensor> operands, ir::AttrMap attrs = {}) {
  Expected<std::vector<at::Tensor>> r = callOp(op, operands, attrs);
  if (!r) FAIL(r.error().message);
  return *r;
}

at::Tensor run1(std::string_view op, std::vector<at::Tensor> operands, ir::AttrMap attrs = {}) {
  std::vector<at::Tensor> r = run(op, std::move(operands), std::move(attrs));
  REQUIRE(r.size() == 1);
  return r[0];
}

void expectClose(const std::string& what, const at::Tensor& ours, const at::Tensor& ref, double atol = kAtol,
                 double rtol = kRtol) {
  REQUIRE_MESSAGE((ours.sizes() == ref.sizes()), what);
  REQUIRE_MESSAGE((ours.scalar_type() == ref.scalar_type()), what);
  at::Tensor a = ours.to(at::kDouble), b = ref.to(at::kDouble);
  at::Tensor diff = (a - b).abs();
  double maxAbs = diff.max().item<double>();
  double refMax = b.abs().max().item<double>();
  double maxRel = refMax > 0 ? maxAbs / refMax : maxAbs;
  MESSAGE(what << ": max abs err " << maxAbs << ", max rel err " << maxRel << " (atol " << atol << ", rtol " << rtol
               << ")");
  CHECK_MESSAGE((diff <= atol + rtol * b.abs()).all().item<bool>(), what << " exceeds the tolerance");
}

// Gradients of `out` with respect to `inputs` under the upstream gradient `upstream`.
std::vector<at::Tensor> autograd(const at::Tensor& out, const std::vector<at::Tensor>& inputs, const at::Tensor& upstream) {
  return torch::autograd::grad({out}, inputs, {upstream});
}

at::Tensor leaf(at::Tensor t) { return t.detach().requires_grad_(true); }

using Ints = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("backward parity: sum_to after broadcasting add and mul") {
  torch::manual_seed(10);
  at::Tensor a = leaf(torch::randn({4, 1, 6})), b = leaf(torch::randn({5, 6}));
  at::Tensor g = torch::randn({4, 5, 6});
  std::vector<at::Tensor> ref = autograd(a + b, {a, b}, g);
  expectClose("sum_to (add, grad a)", run1("sum_to", {g}, {{"shape", Ints{4, 1, 6}}}), ref[0]);
  expectClose("sum_to (add, grad b)", run1("sum_to", {g}, {{"shape", Ints{5, 6}}}), ref[1]);

  ref = autograd(a * b, {a, b}, g);
  at::Tensor ga = run1("sum_to", {run1("mul", {g, b.detach()})}, {{"shape", Ints{4, 1, 6}}});
  at::Tensor gb = run1("sum_to", {run1("mul", {g, a.detach()})}, {{"shape", Ints{5, 6}}});
  expectClose("sum_to (mul, grad a)", ga, ref[0]);
  expectClose("sum_to (mul, grad b)", gb, ref[1]);

  at::Tensor s = leaf(torch::randn({}));
  at::Tensor x = torch::randn({3, 4});
  at::Tensor g2 = torch::randn({3, 4});
  expectClose("sum_to (to a scalar)", run1("sum_to", {run1("mul", {g2, x})}, {{"shape", Ints{}}}),
              autograd(x * s, {s}, g2)[0]);
}

TEST_CASE("backward parity: activations") {
  torch::manual_seed(11);
  at::Tensor x = leaf(torch::randn({3, 5, 7}) * 3);
  at::Tensor g = torch::randn({3, 5, 7});

  at::Tensor y = torch::relu(x);
  expectClose("relu_backward", run1("relu_backward", {g, y.detach()}), autograd(y, {x}, g)[0], 0, 0);
  for (std::string approx : {"none", "tanh"}) {
    at::Tensor yg = F::gelu(x, F::GELUFuncOptions().approximate(approx));
    expectClose("gelu_backward " + approx, run1("gelu_backward", {g, x.detach()}, {{"approximate", approx}}),
                autograd(yg, {x}, g)[0]);
  }
  at::Tensor yt = torch::tanh(x);
  expectClose("tanh_backward", run1("tanh_backward", {g, yt.detach()}), autograd(yt, {x}, g)[0]);
  at::Tensor ys = torch::sigmoid(x);
  expectClose("sigmoid_backward", run1("sigmoid_backward", {g, ys.detach()}), autograd(ys, {x}, g)[0]);
}

TEST_CASE("backward parity: softmax and log_softmax") {
  torch::manual_seed(12);
  at::Tensor x = leaf(torch::randn({3, 4, 9}) * 3);
  at::Tensor g = torch::randn({3, 4, 9});
  for (std::int64_t dim : {-1, 1}) {
    std::string d = " dim " + std::to_string(dim);
    at::Tensor y = torch::softmax(x, dim);
    expectClose("softmax_backward" + d, run1("softmax_backward", {g, y.detach()}, {{"dim", dim}}),
                autograd(y, {x}, g)[0]);
    at::Tensor ly = torch::log_softmax(x, dim);
    expectClose("log_softmax_backward" + d, run1("log_softmax_backward", {g, ly.detach()}, {{"dim", dim}}),
                autograd(ly, {x}, g)[0]);
  }
}

TEST_CASE("backward parity: layer_norm (all three gradients)") {
  torch::manual_seed(13);
  at::Tensor x = leaf(torch::randn({2, 5, 16}) * 2 + 1);
  at::Tensor w = leaf(torch::randn({16})), b = leaf(torch::randn({16}));
  at::Tensor g = torch::randn({2, 5, 16});
  at::Tensor y = F::layer_norm(x, F::LayerNormFuncOptions({16}).weight(w).bias(b).eps(1e-5));
  std::vector<at::Tensor> ref = autograd(y, {x, w, b}, g);

  std::vector<at::Tensor> fwd = run("layer_norm", {x.detach(), w.detach(), b.detach()}, {{"eps", 1e-5}});
  std::vector<at::Tensor> ours =
      run("layer_norm_backward", {g, x.detach(), fwd[1], fwd[2], w.detach(), b.detach()});
  REQUIRE(ours.size() == 3);
  expectClose("layer_norm_backward grad x", ours[0], ref[0]);
  expectClose("layer_norm_backward grad weight", ours[1], ref[1]);
  expectClose("layer_norm_backward grad bias", ours[2], ref[2]);
}

// The host's layer norm rows (runtime/kernels/kernels_layer_norm.cpp): every gradient against
// autograd in f64 within 1e-12, rows with and without a tail beyond the 16-lane blocks, and the
// weight and bias gradients summed over rows split between two threads.
TEST_CASE("backward parity: the host's layer norm in f64, one and two threads") {
  torch::manual_seed(15);
  const int threadsBefore = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (std::int64_t d : {256, 37}) {
      at::Tensor x = leaf((torch::randn({3, 200, d}) * 2 + 1).to(at::kDouble));
      at::Tensor w = leaf(torch::randn({d}).to(at::kDouble)), b = leaf(torch::randn({d}).to(at::kDouble));
      at::Tensor g = torch::randn({3, 200, d}).to(at::kDouble);
      at::Tensor y = F::layer_norm(x, F::LayerNormFuncOptions({d}).weight(w).bias(b).eps(1e-5));
      std::vector<at::Tensor> ref = autograd(y, {x, w, b}, g);
      std::vector<at::Tensor> fwd = run("layer_norm", {x.detach(), w.detach(), b.detach()}, {{"eps", 1e-5}});
      std::vector<at::Tensor> ours = run("layer_norm_backward", {g, x.detach(), fwd[1], fwd[2], w.detach(), b.detach()});
      const std::string what = "layer_norm_backward d " + std::to_string(d) + ", " + std::to_string(threads) + " threads";
      expectClose(what + " grad x", ours[0], ref[0], 1e-12, 1e-12);
      expectClose(what + " grad weight", ours[1], ref[1], 1e-12, 1e-12);
      expectClose(what + " grad bias", ours[2], ref[2], 1e-12, 1e-12);
    }
  }
  at::set_num_threads(threadsBefore);
}

TEST_CASE("backward parity: causal_mask, slice, select, split") {
  torch::manual_seed(14);
  at::Tensor x = leaf(torch::randn({2, 3, 5, 6}));
  at::Tensor g = torch::randn({2, 3, 5, 6});
  at::Tensor mask = torch::ones({5, 6}, torch::kBool).triu(1);
  at::Tensor masked = x.masked_fill(mask, -std::numeric_limits<float>::infinity());
  expectClose("causal_mask_backward", run1("causal_mask_backward", {g}), autograd(masked, {x}, g)[0], 0, 0);

  at::Tensor sl = x.slice(2, 1, 4);
  at::Tensor gs = torch::randn(sl.sizes());
  expectClose("slice_backward",
              run1("slice_backward", {gs},
                   {{"dim", std::int64_t{2}}, {"start", std::int64_t{1}}, {"end", std::int64_t{4}},
                    {"input_shape", Ints{2, 3, 5, 6}}}),
              autograd(sl, {x}, gs)[0], 0, 0);

  at::Tensor se = x.select(-1, 2);
  at::Tensor gse = torch::randn(se.sizes());
  expectClose("select_backward",
              run1("select_backward", {gse},
                   {{"dim", std::int64_t{-1}}, {"index", std::int64_t{2}}, {"input_shape", Ints{2, 3, 5, 6}}}),
              autograd(se, {x}, gse)[0], 0, 0);

  std::vector<at::Tensor> parts = x.split(2, 3);
  std::vector<at::Tensor> gparts;
  for (const at::Tensor& p : parts) gparts.push_back(torch::randn(p.sizes()));
  at::Tensor ref = torch::autograd::grad(parts, {x}, gparts)[0];
  expectClose("concat (gradient of split)", run1("concat", gparts, {{"dim", std::int64_t{3}}}), ref, 0, 0);
}

TEST_CASE("backward parity: embedding with repeated indices") {
  torch::manual_seed(15);
  at::Tensor weight = leaf(torch::randn({7, 4}));
  at::Tensor idx = torch::tensor({3, 1, 3, 3, 0, 6, 1, 3, 5, 0, 0, 2}, torch::kLong).reshape({3, 4});
  at::Tensor y = F::embedding(idx, weight);
  at::Tensor g = torch::randn(y.sizes());
  at::Tensor ref = autograd(y, {weight}, g)[0];
  expectClose("embedding_backward", run1("embedding_backward", {g, idx}, {{"num", std::int64_t{7}}}), ref);
  expectClose("embedding_backward (i32 indices)",
              run1("embedding_backward", {g, idx.to(at::kInt)}, {{"num", std::int64_t{7}}}), ref);
}

// bf16 and f16 on the host run loops of their own (ATen 2.x's index_add_ and softmax convert the
// whole tensor to a float copy, memory a plan does not hold): against the f32 kernels' results
// rounded to the type (within one or two of its ulps), and against ATen's functions in the type.
TEST_CASE("backward parity: embedding and cross_entropy backward in bf16 and f16") {
  torch::manual_seed(17);
  for (at::ScalarType type : {at::kBFloat16, at::kHalf}) {
    CAPTURE(c10::toString(type));
    const double tol = type == at::kBFloat16 ? 1.6e-2 : 2e-3;  // about two ulps of each type
    at::Tensor idx = torch::randint(0, 9, {4, 6}, torch::kLong);
    at::Tensor g = torch::randn({4, 6, 5}).to(type);
    const ir::AttrMap num{{"num", std::int64_t{9}}};
    at::Tensor ours = run1("embedding_backward", {g, idx}, num);
    expectClose("embedding_backward", ours.to(at::kFloat), run1("embedding_backward", {g.to(at::kFloat), idx}, num),
                tol, tol);
    expectClose("embedding_backward (i32 indices)", run1("embedding_backward", {g, idx.to(at::kInt)}, num), ours, 0, 0);
    at::Tensor aten = torch::zeros({9, 5}, g.options()).index_add_(0, idx.reshape({-1}), g.reshape({-1, 5}));
    expectClose("embedding_backward against index_add_", ours, aten, tol, tol);

    at::Tensor logits = (torch::randn({3, 4, 11}) * 3).to(type);
    at::Tensor target = torch::randint(0, 11, {3, 4}, torch::kLong);
    at::Tensor scale = torch::tensor(0.73f).to(type);
    at::Tensor ce = run1("cross_entropy_backward", {scale, logits, target});
    expectClose("cross_entropy_backward", ce.to(at::kFloat),
                run1("cross_entropy_backward", {scale.to(at::kFloat), logits.to(at::kFloat), target}), tol, tol);
    // Logits read through strides: a transposed view.
    at::Tensor strided = logits.transpose(0, 1).contiguous().transpose(0, 1);
    expectClose("cross_entropy_backward (strided logits)", run1("cross_entropy_backward", {scale, strided, target}), ce,
                0, 0);
  }
  // An index outside the table is an error, not a write past it.
  const std::vector<at::Tensor> outside{torch::ones({2, 3}).to(at::kBFloat16), torch::tensor({0, 9}, torch::kLong)};
  CHECK_FALSE(callOp("embedding_backward", outside, {{"num", std::int64_t{9}}}));
}

TEST_CASE("backward parity: cross_entropy (3-D logits, ignore_index) and mse") {
  torch::manual_seed(16);
  at::Tensor logits = leaf(torch::randn({2, 5, 13}) * 3);
  at::Tensor target = torch::randint(0, 13, {2, 5}, torch::kLong);
  at::Tensor loss = F::cross_entropy(logits.reshape({-1, 13}), target.reshape({-1}));
  at::Tensor g = torch::tensor(0.73f);
  at::Tensor ref = autograd(loss, {logits}, g)[0];
  // Ours is g * (softmax - onehot) / N; autograd's log_softmax_backward(nll_loss_backward)
  // differs by rounding of exp(log_softmax) vs softmax.
  expectClose("cross_entropy_backward", run1("cross_entropy_backward", {g, logits.detach(), target}), ref);
  expectClose("cross_entropy_backward (i32 target)",
              run1("cross_entropy_backward", {g, logits.detach(), target.to(at::kInt)}), ref);

  // ignore_index (BERT's masked-LM loss: -100 everywhere but the masked positions): those rows
  // are out of the mean and get no gradient, as in PyTorch.
  at::Tensor masked = target.clone();
  masked.index_put_({torch::rand({2, 5}) < 0.6}, -100);
  masked[0][0] = 4;  // at least one counted row
  const ir::AttrMap ignore{{"ignore_index", std::int64_t{-100}}};
  at::Tensor lossIgnoring =
      F::cross_entropy(logits.reshape({-1, 13}), masked.reshape({-1}), F::CrossEntropyFuncOptions().ignore_index(-100));
  expectClose("cross_entropy (ignore_index)", run1("cross_entropy", {logits.detach(), masked}, ignore),
              lossIgnoring.detach());
  at::Tensor refIgnoring = autograd(lossIgnoring, {logits}, g)[0];
  expectClose("cross_entropy_backward (ignore_index)",
              run1("cross_entropy_backward", {g, logits.detach(), masked}, ignore), refIgnoring);
  expectClose("cross_entropy_backward (ignore_index, i32 target)",
              run1("cross_entropy_backward", {g, logits.detach(), masked.to(at::kInt)}, ignore), refIgnoring);
  CHECK(refIgnoring[0][1].abs().sum().item<double>() == (masked[0][1].item<std::int64_t>() == -100 ? 0.0 :
                                                          refIgnoring[0][1].abs().sum().item<double>()));

  // label_smoothing (with and without ignore_index), as PyTorch's.
  for (bool withIgnore : {false, true}) {
    CAPTURE(withIgnore);
    ir::AttrMap smooth{{"label_smoothing", 0.1}};
    auto options = F::CrossEntropyFuncOptions().label_smoothing(0.1);
    if (withIgnore) {
      smooth["ignore_index"] = std::int64_t{-100};
      options.ignore_index(-100);
    }
    const at::Tensor& t = withIgnore ? masked : target;
    at::Tensor lossSmooth = F::cross_entropy(logits.reshape({-1, 13}), t.reshape({-1}), options);
    expectClose("cross_entropy (label_smoothing)", run1("cross_entropy", {logits.detach(), t}, smooth), lossSmooth.detach());
    expectClose("cross_entropy_backward (label_smoothing)", run1("cross_entropy_backward", {g, logits.detach(), t}, smooth),
                autograd(lossSmooth, {logits}, g)[0]);
  }

  at::Tensor input = leaf(torch::randn({3, 4, 5})), tgt = torch::randn({3, 4, 5});
  at::Tensor mse = F::mse_loss(input, tgt);
  at::Tensor gm = torch::tensor(1.7f);
  expectClose("mse_backward", run1("mse_backward", {gm, input.detach(), tgt}), autograd(mse, {input}, gm)[0]);
}

TEST_CASE("backward parity: linear (3-D input) and batched matmul") {
  torch::manual_seed(17);
  at::Tensor x = leaf(torch::randn({2, 3, 8})), w = leaf(torch::randn({5, 8})), b = leaf(torch::randn({5}));
  at::Tensor y = F::linear(x, w, b);
  at::Tensor g = torch::randn({2, 3, 5});
  std::vector<at::Tensor> ref = autograd(y, {x, w, b}, g);
  expectClose("linear_weight_grad", run1("linear_weight_grad", {g, x.detach()}), ref[1]);
  expectClose("linear grad x (matmul)", run1("matmul", {g, w.detach()}), ref[0]);
  expectClose("linear grad bias (sum_to)", run1("sum_to", {g}, {{"shape", Ints{5}}}), ref[2]);

  // [2, 1, 4, 5] @ [3, 5, 6]: batch dims broadcast, so each gradient is summed back.
  at::Tensor a = leaf(torch::randn({2, 1, 4, 5})), bb = leaf(torch::randn({3, 5, 6}));
  at::Tensor out = torch::matmul(a, bb);
  at::Tensor go = torch::randn(out.sizes());
  std::vector<at::Tensor> mref = autograd(out, {a, bb}, go);
  ir::AttrMap swapLast{{"dim0", std::int64_t{-2}}, {"dim1", std::int64_t{-1}}};
  at::Tensor bt = run1("transpose", {bb.detach()}, swapLast);
  at::Tensor at_ = run1("transpose", {a.detach()}, swapLast);
  at::Tensor ga = run1("sum_to", {run1("matmul", {go, bt})}, {{"shape", Ints{2, 1, 4, 5}}});
  at::Tensor gb = run1("sum_to", {run1("matmul", {at_, go})}, {{"shape", Ints{3, 5, 6}}});
  expectClose("matmul grad a (matmul + transpose + sum_to)", ga, mref[0]);
  expectClose("matmul grad b (matmul + transpose + sum_to)", gb, mref[1]);
}

TEST_CASE("full fills with its value") {
  at::Tensor t = run1("full", {}, {{"shape", Ints{2, 3}}, {"dtype", ir::DType::f32}, {"value", 1.5}});
  CHECK(torch::equal(t, torch::full({2, 3}, 1.5)));
}
