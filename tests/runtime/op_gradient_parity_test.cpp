// Per-op parity through the whole stack: for every forward op, a one-op graph (plus an mse
// loss when the op's result is not already a scalar loss) is differentiated by the autodiff
// pass and run by the executor; LibTorch computes the same function and autograd its
// gradients. Compared: the forward result and the gradient of every float operand.
//
// Tolerance (fp32): max|gradc - torch| <= 1e-5 * max|torch| + 1e-7 per tensor; the measured
// relative error of every case is printed.
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

#include "ir/parser.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/pass_manager.h"
#include "runtime/exec/executor.h"
#include "runtime/train/synthetic_inputs.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc;
namespace F = torch::nn::functional;
using Tensors = std::map<std::string, torch::Tensor>;

namespace {

constexpr std::uint64_t kSeed = 5;
constexpr std::int64_t kStep = 2;

struct OpCase {
  std::string name;
  std::string decls;      // input/param lines (params are differentiated)
  std::string nodes;      // node lines; the value named by `out` is the op's result
  std::string out;        // e.g. "%0"
  std::string outType;    // e.g. "f32[4, 8]"; "f32[]" means the op is the loss itself
  std::function<torch::Tensor(Tensors&)> reference;
};

torch::Tensor dropoutLike(const torch::Tensor& x, double p, std::int64_t rng) {
  Expected<std::vector<at::Tensor>> m =
      runtime::callOp("dropout", std::vector<at::Tensor>{torch::ones(x.sizes())}, {{"p", p}, {"rng", rng}}, {kSeed, kStep});
  REQUIRE(m.ok());
  return x * (*m)[0];
}

// Rotary embedding as Hugging Face's LLaMA writes it: cat(freqs, freqs) tables and rotate_half,
// on x[B, S, H, Dh] with positions along axis 1 (the layout gradc's attention rotates).
torch::Tensor ropeReference(const torch::Tensor& x, double base) {
  const std::int64_t S = x.size(1), dh = x.size(-1);
  torch::Tensor inv = 1.0 / torch::pow(base, torch::arange(0, dh, 2, torch::kFloat) / static_cast<double>(dh));
  torch::Tensor freqs = torch::outer(torch::arange(S, torch::kFloat), inv);
  torch::Tensor emb = torch::cat({freqs, freqs}, -1).view({1, S, 1, dh});
  auto rotateHalf = [&](const torch::Tensor& t) {
    return torch::cat({-t.narrow(-1, dh / 2, dh / 2), t.narrow(-1, 0, dh / 2)}, -1);
  };
  return x * emb.cos() + rotateHalf(x) * emb.sin();
}

// Scaled dot-product attention as the spec's attention lowers it (matmul, scale, causal mask,
// softmax, dropout with the dropout op's mask, matmul), leading axes of k and v broadcast.
torch::Tensor attentionReference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, bool causal,
                                 double scale, double p = 0.0, std::int64_t rng = 0) {
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
  if (causal)
    scores = scores.masked_fill(torch::ones({scores.size(-2), scores.size(-1)}, torch::kBool).triu(1), -INFINITY);
  torch::Tensor probs = torch::softmax(scores, -1);
  if (p > 0) probs = dropoutLike(probs, p, rng);
  return torch::matmul(probs, v);
}

std::vector<OpCase> cases() {
  return {
      {"silu", "param %a : f32[5, 6]\n", "%0 = silu(%a) : f32[5, 6] fwd\n", "%0", "f32[5, 6]",
       [](Tensors& t) { return F::silu(t["a"]); }},
      {"sum (axes 0 and 2)", "param %a : f32[3, 4, 5]\n", "%0 = sum(%a) {dims = [0, 2], keepdim = false} : f32[4] fwd\n",
       "%0", "f32[4]", [](Tensors& t) { return t["a"].sum(std::vector<std::int64_t>{0, 2}); }},
      {"sum (all, keepdim)", "param %a : f32[3, 4]\n", "%0 = sum(%a) {dims = [], keepdim = true} : f32[1, 1] fwd\n",
       "%0", "f32[1, 1]", [](Tensors& t) { return t["a"].sum(std::vector<std::int64_t>{0, 1}, true); }},
      {"mean (last axis, keepdim)", "param %a : f32[3, 4, 5]\n",
       "%0 = mean(%a) {dims = [2], keepdim = true} : f32[3, 4, 1] fwd\n", "%0", "f32[3, 4, 1]",
       [](Tensors& t) { return t["a"].mean(std::vector<std::int64_t>{2}, true); }},
      {"mean (all)", "param %a : f32[3, 4]\n", "%0 = mean(%a) {dims = [], keepdim = false} : f32[] fwd\n", "%0", "f32[]",
       [](Tensors& t) { return t["a"].mean(); }},
      {"concat", "param %a : f32[3, 2]\nparam %b : f32[3, 5]\n", "%0 = concat(%a, %b) {dim = 1} : f32[3, 7] fwd\n", "%0",
       "f32[3, 7]", [](Tensors& t) { return torch::cat({t["a"], t["b"]}, 1); }},
      {"concat (three, leading axis)", "param %a : f32[2, 3]\nparam %b : f32[1, 3]\nparam %c : f32[4, 3]\n",
       "%0 = concat(%a, %b, %c) {dim = 0} : f32[7, 3] fwd\n", "%0", "f32[7, 3]",
       [](Tensors& t) { return torch::cat({t["a"], t["b"], t["c"]}, 0); }},
      {"exp", "param %a : f32[5, 6]\n", "%0 = exp(%a) : f32[5, 6] fwd\n", "%0", "f32[5, 6]",
       [](Tensors& t) { return torch::exp(t["a"]); }},
      {"rms_norm", "param %x : f32[3, 4, 8]\nparam %w : f32[8]\n",
       "%0, %1 = rms_norm(%x, %w) {eps = 1e-06} : f32[3, 4, 8], f32[3, 4, 1] fwd\n", "%0", "f32[3, 4, 8]",
       [](Tensors& t) { return t["x"] * torch::rsqrt(t["x"].pow(2).mean(-1, true) + 1e-6) * t["w"]; }},
      {"rope", "param %x : f32[2, 7, 3, 8]\n", "%0 = rope(%x) {base = 10000.0, inverse = false, seq_dim = 1} : f32[2, 7, 3, 8] fwd\n",
       "%0", "f32[2, 7, 3, 8]", [](Tensors& t) { return ropeReference(t["x"], 10000.0); }},
      {"rope (base 500, positions on the second-last axis)", "param %x : f32[2, 3, 9, 4]\n",
       "%0 = rope(%x) {base = 500.0, inverse = false, seq_dim = -2} : f32[2, 3, 9, 4] fwd\n", "%0", "f32[2, 3, 9, 4]",
       [](Tensors& t) { return ropeReference(t["x"].transpose(1, 2), 500.0).transpose(1, 2); }},
      {"embedding", "input %idx : i64[3, 5]\nparam %w : f32[11, 4]\n", "%0 = embedding(%w, %idx) : f32[3, 5, 4] fwd\n",
       "%0", "f32[3, 5, 4]", [](Tensors& t) { return F::embedding(t["idx"], t["w"]); }},
      {"add (broadcast)", "param %a : f32[3, 4, 5]\nparam %b : f32[4, 1]\n", "%0 = add(%a, %b) : f32[3, 4, 5] fwd\n", "%0",
       "f32[3, 4, 5]", [](Tensors& t) { return t["a"] + t["b"]; }},
      {"sub (broadcast)", "param %a : f32[4, 1]\nparam %b : f32[3, 4, 5]\n", "%0 = sub(%a, %b) : f32[3, 4, 5] fwd\n", "%0",
       "f32[3, 4, 5]", [](Tensors& t) { return t["a"] - t["b"]; }},
      {"mul (broadcast)", "param %a : f32[3, 4, 5]\nparam %b : f32[5]\n", "%0 = mul(%a, %b) : f32[3, 4, 5] fwd\n", "%0",
       "f32[3, 4, 5]", [](Tensors& t) { return t["a"] * t["b"]; }},
      {"scale", "param %a : f32[6, 7]\n", "%0 = scale(%a) {factor = -0.375} : f32[6, 7] fwd\n", "%0", "f32[6, 7]",
       [](Tensors& t) { return t["a"] * -0.375; }},
      {"matmul (batched)", "param %a : f32[2, 3, 4, 5]\nparam %b : f32[2, 3, 5, 6]\n",
       "%0 = matmul(%a, %b) : f32[2, 3, 4, 6] fwd\n", "%0", "f32[2, 3, 4, 6]",
       [](Tensors& t) { return torch::matmul(t["a"], t["b"]); }},
      {"matmul (broadcast batch)", "param %a : f32[2, 4, 5]\nparam %b : f32[5, 3]\n",
       "%0 = matmul(%a, %b) : f32[2, 4, 3] fwd\n", "%0", "f32[2, 4, 3]",
       [](Tensors& t) { return torch::matmul(t["a"], t["b"]); }},
      {"linear (3-D, bias)", "param %x : f32[2, 3, 8]\nparam %w : f32[5, 8]\nparam %b : f32[5]\n",
       "%0 = linear(%x, %w, %b) : f32[2, 3, 5] fwd\n", "%0", "f32[2, 3, 5]",
       [](Tensors& t) { return F::linear(t["x"], t["w"], t["b"]); }},
      {"relu", "param %a : f32[5, 6]\n", "%0 = relu(%a) : f32[5, 6] fwd\n", "%0", "f32[5, 6]",
       [](Tensors& t) { return torch::relu(t["a"]); }},
      {"gelu", "param %a : f32[5, 6]\n", "%0 = gelu(%a) : f32[5, 6] fwd\n", "%0", "f32[5, 6]",
       [](Tensors& t) { return F::gelu(t["a"]); }},
      {"gelu (tanh)", "param %a : f32[5, 6]\n", "%0 = gelu(%a) {approximate = \"tanh\"} : f32[5, 6] fwd\n", "%0",
       "f32[5, 6]", [](Tensors& t) { return F::gelu(t["a"], F::GELUFuncOptions().approximate("tanh")); }},
      {"tanh", "param %a : f32[5, 6]\n", "%0 = tanh(%a) : f32[5, 6] fwd\n", "%0", "f32[5, 6]",
       [](Tensors& t) { return torch::tanh(t["a"]); }},
      {"sigmoid", "param %a : f32[5, 6]\n", "%0 = sigmoid(%a) : f32[5, 6] fwd\n", "%0", "f32[5, 6]",
       [](Tensors& t) { return torch::sigmoid(t["a"]); }},
      {"softmax", "param %a : f32[3, 4, 6]\n", "%0 = softmax(%a) {dim = 1} : f32[3, 4, 6] fwd\n", "%0", "f32[3, 4, 6]",
       [](Tensors& t) { return torch::softmax(t["a"], 1); }},
      {"log_softmax", "param %a : f32[3, 4, 6]\n", "%0 = log_softmax(%a) {dim = 2} : f32[3, 4, 6] fwd\n", "%0",
       "f32[3, 4, 6]", [](Tensors& t) { return torch::log_softmax(t["a"], 2); }},
      {"conv2d (stride 2, padding 1, 2 groups, bias)",
       "param %x : f32[2, 4, 9, 9]\nparam %w : f32[6, 2, 3, 3]\nparam %b : f32[6]\n",
       "%0 = conv2d(%x, %w, %b) {dilation = [1, 1], groups = 2, padding = [1, 1], stride = [2, 2]} : f32[2, 6, 5, 5] fwd\n",
       "%0", "f32[2, 6, 5, 5]",
       [](Tensors& t) { return F::conv2d(t["x"], t["w"], F::Conv2dFuncOptions().bias(t["b"]).stride(2).padding(1).groups(2)); }},
      {"conv2d (dilation 2, rectangular padding, no bias)", "param %x : f32[2, 3, 8, 7]\nparam %w : f32[5, 3, 3, 2]\n",
       "%0 = conv2d(%x, %w) {dilation = [2, 2], groups = 1, padding = [2, 0], stride = [1, 1]} : f32[2, 5, 8, 5] fwd\n",
       "%0", "f32[2, 5, 8, 5]",
       [](Tensors& t) { return F::conv2d(t["x"], t["w"], F::Conv2dFuncOptions().dilation(2).padding({2, 0})); }},
      // 64x64 outputs: one sample per GEMM (the cases above batch their small outputs).
      {"conv2d (3x3, 64x64 output, one sample per GEMM)", "param %x : f32[2, 3, 64, 64]\nparam %w : f32[4, 3, 3, 3]\n",
       "%0 = conv2d(%x, %w) {dilation = [1, 1], groups = 1, padding = [1, 1], stride = [1, 1]} : f32[2, 4, 64, 64] fwd\n",
       "%0", "f32[2, 4, 64, 64]", [](Tensors& t) { return F::conv2d(t["x"], t["w"], F::Conv2dFuncOptions().padding(1)); }},
      {"conv2d (pointwise, 64x64, groups 2)", "param %x : f32[2, 4, 64, 64]\nparam %w : f32[6, 2, 1, 1]\n",
       "%0 = conv2d(%x, %w) {dilation = [1, 1], groups = 2, padding = [0, 0], stride = [1, 1]} : f32[2, 6, 64, 64] fwd\n",
       "%0", "f32[2, 6, 64, 64]", [](Tensors& t) { return F::conv2d(t["x"], t["w"], F::Conv2dFuncOptions().groups(2)); }},
      {"conv2d (pointwise 1x1)", "param %x : f32[3, 4, 5, 5]\nparam %w : f32[6, 4, 1, 1]\nparam %b : f32[6]\n",
       "%0 = conv2d(%x, %w, %b) {dilation = [1, 1], groups = 1, padding = [0, 0], stride = [1, 1]} : f32[3, 6, 5, 5] fwd\n",
       "%0", "f32[3, 6, 5, 5]", [](Tensors& t) { return F::conv2d(t["x"], t["w"], F::Conv2dFuncOptions().bias(t["b"])); }},
      {"batch_norm (training, batch statistics)", "param %x : f32[4, 3, 5, 5]\nparam %w : f32[3]\nparam %b : f32[3]\n",
       "%0, %1, %2, %3 = batch_norm(%x, %w, %b) {eps = 1e-05} : f32[4, 3, 5, 5], f32[3], f32[3], f32[3] fwd\n", "%0",
       "f32[4, 3, 5, 5]",
       [](Tensors& t) { return torch::batch_norm(t["x"], t["w"], t["b"], {}, {}, true, 0.1, 1e-5, false); }},
      {"max_pool2d (3x3, stride 2, padding 1)", "param %x : f32[2, 3, 7, 7]\n",
       "%0, %1 = max_pool2d(%x) {ceil_mode = false, dilation = [1, 1], kernel = [3, 3], padding = [1, 1], stride = [2, 2]} "
       ": f32[2, 3, 4, 4], i64[2, 3, 4, 4] fwd\n",
       "%0", "f32[2, 3, 4, 4]",
       [](Tensors& t) { return F::max_pool2d(t["x"], F::MaxPool2dFuncOptions(3).stride(2).padding(1)); }},
      {"max_pool2d (ceil_mode, dilation 2)", "param %x : f32[2, 2, 8, 8]\n",
       "%0, %1 = max_pool2d(%x) {ceil_mode = true, dilation = [2, 2], kernel = [2, 2], padding = [0, 0], stride = [2, 2]} "
       ": f32[2, 2, 4, 4], i64[2, 2, 4, 4] fwd\n",
       "%0", "f32[2, 2, 4, 4]",
       [](Tensors& t) { return F::max_pool2d(t["x"], F::MaxPool2dFuncOptions(2).stride(2).dilation(2).ceil_mode(true)); }},
      {"avg_pool2d (3x3, stride 2, padding 1, padding not counted)", "param %x : f32[2, 3, 7, 7]\n",
       "%0 = avg_pool2d(%x) {ceil_mode = false, count_include_pad = false, kernel = [3, 3], padding = [1, 1], "
       "stride = [2, 2]} : f32[2, 3, 4, 4] fwd\n",
       "%0", "f32[2, 3, 4, 4]",
       [](Tensors& t) {
         return F::avg_pool2d(t["x"], F::AvgPool2dFuncOptions(3).stride(2).padding(1).count_include_pad(false));
       }},
      {"avg_pool2d (global 4x4)", "param %x : f32[2, 5, 4, 4]\n",
       "%0 = avg_pool2d(%x) {ceil_mode = false, count_include_pad = true, kernel = [4, 4], padding = [0, 0], "
       "stride = [4, 4]} : f32[2, 5, 1, 1] fwd\n",
       "%0", "f32[2, 5, 1, 1]",
       [](Tensors& t) { return F::adaptive_avg_pool2d(t["x"], F::AdaptiveAvgPool2dFuncOptions(1)); }},
      {"adaptive_avg_pool2d (7x5 -> 3x2: unequal, overlapping windows)", "param %x : f32[2, 3, 7, 5]\n",
       "%0 = adaptive_avg_pool2d(%x) {output_size = [3, 2]} : f32[2, 3, 3, 2] fwd\n", "%0", "f32[2, 3, 3, 2]",
       [](Tensors& t) { return F::adaptive_avg_pool2d(t["x"], F::AdaptiveAvgPool2dFuncOptions({3, 2})); }},
      {"adaptive_avg_pool2d (5x9 -> 4x4, more outputs than rows per window)", "param %x : f32[1, 2, 5, 9]\n",
       "%0 = adaptive_avg_pool2d(%x) {output_size = [4, 4]} : f32[1, 2, 4, 4] fwd\n", "%0", "f32[1, 2, 4, 4]",
       [](Tensors& t) { return F::adaptive_avg_pool2d(t["x"], F::AdaptiveAvgPool2dFuncOptions(4)); }},
      {"layer_norm", "param %x : f32[3, 4, 8]\nparam %w : f32[8]\nparam %b : f32[8]\n",
       "%0, %1, %2 = layer_norm(%x, %w, %b) {eps = 1e-05} : f32[3, 4, 8], f32[3, 4, 1], f32[3, 4, 1] fwd\n", "%0",
       "f32[3, 4, 8]",
       [](Tensors& t) { return F::layer_norm(t["x"], F::LayerNormFuncOptions({8}).weight(t["w"]).bias(t["b"]).eps(1e-5)); }},
      {"dropout", "param %a : f32[16, 16]\n", "%0 = dropout(%a) {p = 0.25, rng = 9} : f32[16, 16] fwd\n", "%0",
       "f32[16, 16]", [](Tensors& t) { return dropoutLike(t["a"], 0.25, 9); }},
      {"causal_mask (under softmax)", "param %a : f32[2, 5, 5]\n",
       "%0 = causal_mask(%a) : f32[2, 5, 5] fwd\n%1 = softmax(%0) {dim = 2} : f32[2, 5, 5] fwd\n", "%1", "f32[2, 5, 5]",
       [](Tensors& t) {
         return torch::softmax(t["a"].masked_fill(torch::ones({5, 5}, torch::kBool).triu(1), -INFINITY), 2);
       }},
      {"attention (causal, fused: tiled kernel)", "param %q : f32[2, 3, 5, 4]\nparam %k : f32[2, 3, 5, 4]\nparam %v : f32[2, 3, 5, 4]\n",
       "%0, %1 = attention(%q, %k, %v) {causal = true, scale = 0.5} : f32[2, 3, 5, 4], f32[2, 3, 5] fwd\n", "%0",
       "f32[2, 3, 5, 4]", [](Tensors& t) { return attentionReference(t["q"], t["k"], t["v"], true, 0.5); }},
      {"attention (grouped-query heads, cross: 6 queries, 9 keys)",
       "param %q : f32[2, 2, 3, 6, 4]\nparam %k : f32[2, 2, 1, 9, 4]\nparam %v : f32[2, 2, 1, 9, 5]\n",
       "%0, %1 = attention(%q, %k, %v) {causal = false, scale = 0.5} : f32[2, 2, 3, 6, 5], f32[2, 2, 3, 6] fwd\n", "%0",
       "f32[2, 2, 3, 6, 5]", [](Tensors& t) { return attentionReference(t["q"], t["k"], t["v"], false, 0.5); }},
      {"attention (causal, dropout 0.25)", "param %q : f32[1, 2, 7, 4]\nparam %k : f32[1, 2, 7, 4]\nparam %v : f32[1, 2, 7, 4]\n",
       "%0, %1 = attention(%q, %k, %v) {causal = true, p = 0.25, rng = 9, scale = 0.5} : f32[1, 2, 7, 4], f32[1, 2, 7] fwd\n",
       "%0", "f32[1, 2, 7, 4]", [](Tensors& t) { return attentionReference(t["q"], t["k"], t["v"], true, 0.5, 0.25, 9); }},
      {"reshape", "param %a : f32[4, 6]\n", "%0 = reshape(%a) {shape = [2, 3, 4]} : f32[2, 3, 4] fwd\n", "%0",
       "f32[2, 3, 4]", [](Tensors& t) { return t["a"].reshape({2, 3, 4}); }},
      {"transpose", "param %a : f32[2, 3, 4]\n", "%0 = transpose(%a) {dim0 = 0, dim1 = 2} : f32[4, 3, 2] fwd\n", "%0",
       "f32[4, 3, 2]", [](Tensors& t) { return t["a"].transpose(0, 2); }},
      {"slice", "param %a : f32[7, 3]\n", "%0 = slice(%a) {dim = 0, end = 5, start = 2} : f32[3, 3] fwd\n", "%0",
       "f32[3, 3]", [](Tensors& t) { return t["a"].slice(0, 2, 5); }},
      {"select", "param %a : f32[4, 5, 3]\n", "%0 = select(%a) {dim = 1, index = 3} : f32[4, 3] fwd\n", "%0", "f32[4, 3]",
       [](Tensors& t) { return t["a"].select(1, 3); }},
      {"split (one part unused)", "param %a : f32[4, 9]\n",
       "%0, %1, %2 = split(%a) {dim = 1, sections = 3} : f32[4, 3], f32[4, 3], f32[4, 3] fwd\n"
       "%3 = mul(%0, %2) : f32[4, 3] fwd\n",
       "%3", "f32[4, 3]", [](Tensors& t) { auto p = t["a"].chunk(3, 1); return p[0] * p[2]; }},
      {"unbind (one part unused)", "param %a : f32[2, 3, 4]\n",
       "%0, %1, %2 = unbind(%a) {dim = 1} : f32[2, 4], f32[2, 4], f32[2, 4] fwd\n%3 = sub(%2, %0) : f32[2, 4] fwd\n",
       "%3", "f32[2, 4]", [](Tensors& t) { auto p = t["a"].unbind(1); return p[2] - p[0]; }},
      {"stack", "param %a : f32[3, 4]\nparam %b : f32[3, 4]\n", "%0 = stack(%a, %b, %a) {dim = 1} : f32[3, 3, 4] fwd\n",
       "%0", "f32[3, 3, 4]", [](Tensors& t) { return torch::stack({t["a"], t["b"], t["a"]}, 1); }},
      {"zeros (no gradient; added to a parameter)", "param %a : f32[3, 4]\n",
       "%0 = zeros() {dtype = f32, shape = [3, 4]} : f32[3, 4] fwd\n%1 = add(%a, %0) : f32[3, 4] fwd\n", "%1",
       "f32[3, 4]", [](Tensors& t) { return t["a"] + torch::zeros({3, 4}); }},
      {"cross_entropy (3-D logits)", "input %y : i64[2, 3]\nparam %logits : f32[2, 3, 7]\n",
       "%0 = cross_entropy(%logits, %y) : f32[] fwd\n", "%0", "f32[]",
       [](Tensors& t) { return F::cross_entropy(t["logits"].reshape({6, 7}), t["y"].reshape({6})); }},
      {"mse (both operands learned)", "param %a : f32[4, 5]\nparam %b : f32[4, 5]\n", "%0 = mse(%a, %b) : f32[] fwd\n",
       "%0", "f32[]", [](Tensors& t) { return F::mse_loss(t["a"], t["b"]); }},
  };
}

// max|a - b| / max|b| (or the absolute difference when b is all zeros), and whether it passes.
std::pair<double, bool> compare(const torch::Tensor& ours, const torch::Tensor& ref) {
  double scale = ref.abs().max().item<double>();
  double diff = (ours - ref).abs().max().item<double>();
  return {scale > 0 ? diff / scale : diff, diff <= 1e-5 * scale + 1e-7};
}

}  // namespace

TEST_CASE("every forward op: gradc forward and gradients through autodiff vs LibTorch autograd") {
  std::set<std::string> covered;
  for (const OpCase& c : cases()) {
    CAPTURE(c.name);
    std::string text = "graph g\n" + c.decls;
    bool isLoss = c.outType == "f32[]";
    if (!isLoss) text += "input %target : " + c.outType + "\n";
    text += c.nodes;
    if (!isLoss) text += "%1000 = mse(" + c.out + ", %target) : f32[] fwd\n";
    text += "output loss = " + (isLoss ? c.out : std::string("%1000")) + "\noutput value = " + c.out + "\n";
    Expected<ir::Graph> parsed = ir::parseGraph(text, c.name);
    REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
    ir::Graph g = std::move(*parsed);
    for (const auto& n : g.nodes()) covered.insert(std::string(n->opName()));
    passes::PassManager pm;
    pm.add<passes::Autodiff>().add<passes::DeadCodeElimination>();
    Expected<bool> ran = pm.run(g);
    REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));

    torch::manual_seed(17);
    runtime::TensorMap state, inputs;
    Tensors refInputs;
    for (const auto& p : g.params()) {
      torch::Tensor v = torch::randn(p->type().shape);
      state.emplace(p->name(), v.clone());
      refInputs[p->name()] = v.clone().requires_grad_(true);
    }
    for (const auto& in : g.inputs()) {
      torch::Tensor v = runtime::syntheticInput(*in, kSeed, kStep);
      inputs.emplace(in->name(), v);
      refInputs[in->name()] = v;
    }
    Expected<runtime::Executor> exec = runtime::Executor::create(g);
    REQUIRE_MESSAGE(exec.ok(), (exec.ok() ? "" : exec.error().message));
    Expected<runtime::TensorMap> out = exec->run(inputs, state, {kSeed, kStep});
    REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));

    torch::Tensor value = c.reference(refInputs);
    torch::Tensor loss = isLoss ? value : F::mse_loss(value, refInputs["target"]);
    loss.backward();

    auto [fwdRel, fwdOk] = compare(out->at("value"), value.detach());
    CHECK_MESSAGE(fwdOk, "forward differs: rel " << fwdRel);
    double worst = 0;
    for (const auto& p : g.params()) {
      const torch::Tensor& refGrad = refInputs[p->name()].grad();
      REQUIRE(refGrad.defined());
      auto [rel, ok] = compare(out->at("grad." + p->name()), refGrad);
      CHECK_MESSAGE(ok, "gradient of " << p->name() << " differs: rel " << rel);
      worst = std::max(worst, rel);
    }
    MESSAGE(c.name << ": forward rel err " << fwdRel << ", worst gradient rel err " << worst);
  }
  // Every op a spec can lower to is covered (the forward half of the op table).
  for (const char* op : {"embedding", "add", "sub", "mul", "scale", "matmul", "linear", "relu", "gelu", "tanh", "sigmoid",
                         "softmax", "log_softmax", "layer_norm", "dropout", "causal_mask", "reshape", "transpose",
                         "slice", "select", "split", "unbind", "stack", "zeros", "cross_entropy", "mse", "silu", "exp",
                         "rms_norm", "rope", "sum", "mean", "concat", "conv2d", "batch_norm", "max_pool2d",
                         "avg_pool2d", "attention"}) {
    CAPTURE(op);
    CHECK(covered.count(op));
  }
}
