// Whole-model parity: every bundled model (at reduced sizes), compiled by gradc, differentiated
// by the autodiff pass and run by the executor, against the same model built from LibTorch
// modules (torch::nn) with the same weights, inputs and dropout masks, differentiated by
// LibTorch autograd. Compared: the loss and the gradient of every parameter.
//
// Tolerance: fp32, |gradc - torch| <= 1e-5 * max|torch| + 1e-6 for the loss and every gradient
// tensor (summation orders differ between the two graphs, so bitwise equality is not
// expected). The measured maxima are printed.
#include <torch/torch.h>

#include <deque>
#include <functional>
#include <string>

#include "frontend/spec.h"
#include "ir/graph.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/fuse_attention.h"
#include "passes/pass_manager.h"
#include "runtime/exec/executor.h"
#include "runtime/train/init.h"
#include "runtime/train/synthetic_inputs.h"
#include "tests/bundled_model.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc;
namespace nn = torch::nn;
namespace F = torch::nn::functional;

namespace {

constexpr std::uint64_t kSeed = 7;
constexpr std::int64_t kStep = 3;

// With `fusedAttention`, the attention cores are fused first (passes/fuse_attention.h), as
// gradc compile and train do: the reference is the same torch::nn model either way.
ir::Graph compileModel(const std::string& model, std::vector<std::pair<std::string, std::string>> sets,
                       bool fusedAttention = false) {
  ir::Graph g = testing::compileBundledModel(model, std::move(sets));
  if (fusedAttention) {
    Expected<int> fused = passes::fuseAttention(g);
    REQUIRE(fused.ok());
    CHECK(*fused > 0);
  }
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(g);
  REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));
  return g;
}

// Dropout as the runtime computes it: the masks come from the dropout kernel itself, keyed by
// the rng ids of the graph's forward dropout nodes (and fused attention nodes with dropout on
// their probabilities, which draw the same elements) in program order (the order in which the
// reference model below applies dropout).
class DropoutMasks {
 public:
  explicit DropoutMasks(const ir::Graph& g) {
    for (const auto& n : g.nodes()) {
      const bool dropout = n->opName() == "dropout" ||
                           (n->opName() == "attention" && ir::getFloat(n->attrs(), "p").value_or(0.0) > 0.0);
      if (dropout && n->phase() == ir::Phase::fwd)
        keys_.push_back({*ir::getInt(n->attrs(), "rng"), *ir::getFloat(n->attrs(), "p")});
    }
  }
  torch::Tensor apply(const torch::Tensor& x, double p) {
    REQUIRE_FALSE(keys_.empty());
    auto [rng, gp] = keys_.front();
    keys_.pop_front();
    CHECK(gp == p);
    torch::Tensor ones = torch::ones(x.sizes());
    Expected<std::vector<at::Tensor>> m =
        runtime::callOp("dropout", std::vector<at::Tensor>{ones}, {{"p", p}, {"rng", rng}}, {kSeed, kStep});
    REQUIRE(m.ok());
    return x * (*m)[0];
  }
  bool consumedAll() const { return keys_.empty(); }

 private:
  std::deque<std::pair<std::int64_t, double>> keys_;
};

// ---- reference models (torch::nn), parameters registered under gradc's names ----------------

struct AttentionImpl : nn::Module {
  AttentionImpl(std::int64_t d, std::int64_t heads, double attnDropout)
      : heads(heads), attnDropout(attnDropout), qkv(register_module("qkv", nn::Linear(d, 3 * d))),
        proj(register_module("proj", nn::Linear(d, d))) {}
  torch::Tensor forward(const torch::Tensor& x, DropoutMasks& drop) {
    std::int64_t B = x.size(0), S = x.size(1), D = x.size(2), Dh = D / heads;
    std::vector<torch::Tensor> parts = qkv(x).chunk(3, -1);
    auto split = [&](const torch::Tensor& t) { return t.reshape({B, S, heads, Dh}).transpose(1, 2); };
    torch::Tensor q = split(parts[0]), k = split(parts[1]), v = split(parts[2]);
    torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) * (1.0 / std::sqrt(static_cast<double>(Dh)));
    torch::Tensor mask = torch::ones({S, S}, torch::kBool).triu(1);
    torch::Tensor p = torch::softmax(scores.masked_fill(mask, -INFINITY), -1);
    if (attnDropout > 0) p = drop.apply(p, attnDropout);
    return proj(torch::matmul(p, v).transpose(1, 2).reshape({B, S, D}));
  }
  std::int64_t heads;
  double attnDropout;
  nn::Linear qkv, proj;
};
TORCH_MODULE(Attention);

// gpt-mini: pre-norm blocks (GPT-2 layout).
struct GptMiniImpl : nn::Module {
  GptMiniImpl(std::int64_t vocab, std::int64_t seq, std::int64_t d, std::int64_t heads, std::int64_t layers)
      : wte(register_module("wte", nn::Embedding(vocab, d))), wpe(register_module("wpe", nn::Embedding(seq, d))),
        blocks(register_module("blocks", nn::ModuleList())), ln_f(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({d})))),
        lm_head(register_module("lm_head", nn::Linear(nn::LinearOptions(d, vocab).bias(false)))) {
    for (std::int64_t i = 0; i < layers; ++i) {
      auto block = std::make_shared<nn::Module>();
      block->register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})));
      block->register_module("attn", Attention(d, heads, 0.0));
      block->register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})));
      block->register_module("fc1", nn::Linear(d, 4 * d));
      block->register_module("fc2", nn::Linear(4 * d, d));
      blocks->push_back(block);
    }
  }
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets, DropoutMasks& drop) {
    torch::Tensor x = wte(tokens) + wpe->weight.slice(0, 0, tokens.size(1));
    x = drop.apply(x, 0.1);
    for (const auto& m : *blocks) {
      auto ln1 = m->named_children()["ln1"]->as<nn::LayerNorm>();
      auto attn = m->named_children()["attn"]->as<AttentionImpl>();
      auto ln2 = m->named_children()["ln2"]->as<nn::LayerNorm>();
      auto fc1 = m->named_children()["fc1"]->as<nn::Linear>();
      auto fc2 = m->named_children()["fc2"]->as<nn::Linear>();
      x = x + attn->forward(ln1->forward(x), drop);
      x = x + fc2->forward(F::gelu(fc1->forward(ln2->forward(x))));
    }
    torch::Tensor logits = lm_head(ln_f(x));
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  nn::Embedding wte, wpe;
  nn::ModuleList blocks;
  nn::LayerNorm ln_f;
  nn::Linear lm_head;
};
TORCH_MODULE(GptMini);

// gpt2: gpt-mini's layout with GPT-2's dropouts (embeddings, attention probabilities, both
// residual branches), GELU's tanh approximation, a position table longer than the sequence and
// the LM head tied to wte: one parameter read by the embedding and the head.
struct Gpt2Impl : nn::Module {
  Gpt2Impl(std::int64_t vocab, std::int64_t context, std::int64_t d, std::int64_t heads, std::int64_t layers)
      : wte(register_module("wte", nn::Embedding(vocab, d))), wpe(register_module("wpe", nn::Embedding(context, d))),
        blocks(register_module("blocks", nn::ModuleList())),
        ln_f(register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({d})))) {
    for (std::int64_t i = 0; i < layers; ++i) {
      auto block = std::make_shared<nn::Module>();
      block->register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})));
      block->register_module("attn", Attention(d, heads, 0.1));
      block->register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})));
      block->register_module("fc1", nn::Linear(d, 4 * d));
      block->register_module("fc2", nn::Linear(4 * d, d));
      blocks->push_back(block);
    }
  }
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets, DropoutMasks& drop) {
    torch::Tensor x = drop.apply(wte(tokens) + wpe->weight.slice(0, 0, tokens.size(1)), 0.1);
    for (const auto& m : *blocks) {
      auto child = [&](const char* n) { return m->named_children()[n]; };
      torch::Tensor a = child("attn")->as<AttentionImpl>()->forward(child("ln1")->as<nn::LayerNorm>()->forward(x), drop);
      x = x + drop.apply(a, 0.1);
      torch::Tensor h = child("fc1")->as<nn::Linear>()->forward(child("ln2")->as<nn::LayerNorm>()->forward(x));
      h = child("fc2")->as<nn::Linear>()->forward(F::gelu(h, F::GELUFuncOptions().approximate("tanh")));
      x = x + drop.apply(h, 0.1);
    }
    torch::Tensor logits = F::linear(ln_f(x), wte->weight);
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  nn::Embedding wte, wpe;
  nn::ModuleList blocks;
  nn::LayerNorm ln_f;
};
TORCH_MODULE(Gpt2);

// llama: Hugging Face's LlamaForCausalLM computation written out (RMSNorm, rotary embeddings on
// [B, H, S, Dh] with rotate_half, grouped-query attention with repeat_kv, SwiGLU), parameters
// under gradc's names (Hugging Face's without "model.").
// An RMSNorm's weight, as a module so that its parameter is named "<module>.weight".
struct NormWeightImpl : nn::Module {
  explicit NormWeightImpl(std::int64_t d) : weight(register_parameter("weight", torch::ones({d}))) {}
  torch::Tensor weight;
};
TORCH_MODULE(NormWeight);

struct LlamaImpl : nn::Module {
  LlamaImpl(std::int64_t vocab, std::int64_t d, std::int64_t heads, std::int64_t kvHeads, std::int64_t layers,
            std::int64_t ff)
      : heads(heads), kvHeads(kvHeads), embed(register_module("embed_tokens", nn::Embedding(vocab, d))),
        layers_(register_module("layers", nn::ModuleList())),
        norm(register_module("norm", NormWeight(d))),
        lmHead(register_module("lm_head", nn::Linear(nn::LinearOptions(d, vocab).bias(false)))) {
    const std::int64_t dh = d / heads;
    for (std::int64_t i = 0; i < layers; ++i) {
      auto block = std::make_shared<nn::Module>();
      block->register_module("input_layernorm", NormWeight(d));
      auto attn = std::make_shared<nn::Module>();
      attn->register_module("q_proj", nn::Linear(nn::LinearOptions(d, heads * dh).bias(false)));
      attn->register_module("k_proj", nn::Linear(nn::LinearOptions(d, kvHeads * dh).bias(false)));
      attn->register_module("v_proj", nn::Linear(nn::LinearOptions(d, kvHeads * dh).bias(false)));
      attn->register_module("o_proj", nn::Linear(nn::LinearOptions(heads * dh, d).bias(false)));
      block->register_module("self_attn", attn);
      block->register_module("post_attention_layernorm", NormWeight(d));
      auto mlp = std::make_shared<nn::Module>();
      mlp->register_module("gate_proj", nn::Linear(nn::LinearOptions(d, ff).bias(false)));
      mlp->register_module("up_proj", nn::Linear(nn::LinearOptions(d, ff).bias(false)));
      mlp->register_module("down_proj", nn::Linear(nn::LinearOptions(ff, d).bias(false)));
      block->register_module("mlp", mlp);
      layers_->push_back(block);
    }
  }
  static torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& w) {
    return w * (x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5));
  }
  static torch::Tensor rotateHalf(const torch::Tensor& t) {
    const std::int64_t h = t.size(-1) / 2;
    return torch::cat({-t.narrow(-1, h, h), t.narrow(-1, 0, h)}, -1);
  }
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets, DropoutMasks&) {
    torch::Tensor x = embed(tokens);
    const std::int64_t B = x.size(0), S = x.size(1), D = x.size(2), dh = D / heads;
    torch::Tensor inv = 1.0 / torch::pow(10000.0, torch::arange(0, dh, 2, torch::kFloat) / static_cast<double>(dh));
    torch::Tensor freqs = torch::outer(torch::arange(S, torch::kFloat), inv);
    torch::Tensor emb = torch::cat({freqs, freqs}, -1);
    torch::Tensor cos = emb.cos(), sin = emb.sin();  // [S, Dh], broadcast over [B, H, S, Dh]
    auto linear = [](const std::shared_ptr<nn::Module>& m, const char* name, const torch::Tensor& t) {
      return m->named_children()[name]->as<nn::Linear>()->forward(t);
    };
    for (const auto& m : *layers_) {
      auto attn = m->named_children()["self_attn"];
      auto mlp = m->named_children()["mlp"];
      torch::Tensor h = rmsNorm(x, m->named_children()["input_layernorm"]->as<NormWeightImpl>()->weight);
      torch::Tensor q = linear(attn, "q_proj", h).view({B, S, heads, dh}).transpose(1, 2);
      torch::Tensor k = linear(attn, "k_proj", h).view({B, S, kvHeads, dh}).transpose(1, 2);
      torch::Tensor v = linear(attn, "v_proj", h).view({B, S, kvHeads, dh}).transpose(1, 2);
      q = q * cos + rotateHalf(q) * sin;
      k = k * cos + rotateHalf(k) * sin;
      k = k.repeat_interleave(heads / kvHeads, 1);  // repeat_kv
      v = v.repeat_interleave(heads / kvHeads, 1);
      torch::Tensor scores = torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(dh));
      scores = scores.masked_fill(torch::ones({S, S}, torch::kBool).triu(1), -INFINITY);
      torch::Tensor a = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({B, S, D});
      x = x + linear(attn, "o_proj", a);
      h = rmsNorm(x, m->named_children()["post_attention_layernorm"]->as<NormWeightImpl>()->weight);
      x = x + linear(mlp, "down_proj", F::silu(linear(mlp, "gate_proj", h)) * linear(mlp, "up_proj", h));
    }
    torch::Tensor logits = lmHead(rmsNorm(x, norm->weight));
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  std::int64_t heads, kvHeads;
  nn::Embedding embed;
  nn::ModuleList layers_;
  NormWeight norm;
  nn::Linear lmHead;
};
TORCH_MODULE(Llama);

// lm-seed: post-norm blocks (GPT-1 layout) with attention and residual dropout.
struct LmSeedImpl : nn::Module {
  LmSeedImpl(std::int64_t vocab, std::int64_t seq, std::int64_t d, std::int64_t heads, std::int64_t layers)
      : wte(register_module("wte", nn::Embedding(vocab, d))), wpe(register_module("wpe", nn::Embedding(seq, d))),
        blocks(register_module("blocks", nn::ModuleList())),
        lm_head(register_module("lm_head", nn::Linear(nn::LinearOptions(d, vocab).bias(false)))) {
    for (std::int64_t i = 0; i < layers; ++i) {
      auto block = std::make_shared<nn::Module>();
      block->register_module("attn", Attention(d, heads, 0.1));
      block->register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})));
      block->register_module("fc1", nn::Linear(d, 4 * d));
      block->register_module("fc2", nn::Linear(4 * d, d));
      block->register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})));
      blocks->push_back(block);
    }
  }
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets, DropoutMasks& drop) {
    torch::Tensor x = drop.apply(wte(tokens) + wpe->weight.slice(0, 0, tokens.size(1)), 0.1);
    for (const auto& m : *blocks) {
      auto child = [&](const char* n) { return m->named_children()[n]; };
      x = child("ln1")->as<nn::LayerNorm>()->forward(
          x + drop.apply(child("attn")->as<AttentionImpl>()->forward(x, drop), 0.1));
      torch::Tensor h = child("fc2")->as<nn::Linear>()->forward(F::gelu(child("fc1")->as<nn::Linear>()->forward(x)));
      x = child("ln2")->as<nn::LayerNorm>()->forward(x + drop.apply(h, 0.1));
    }
    torch::Tensor logits = lm_head(x);
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  nn::Embedding wte, wpe;
  nn::ModuleList blocks;
  nn::Linear lm_head;
};
TORCH_MODULE(LmSeed);

struct LstmLmImpl : nn::Module {
  LstmLmImpl(std::int64_t vocab, std::int64_t embed, std::int64_t hidden)
      : embed(register_module("embed", nn::Embedding(vocab, embed))),
        lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(embed, hidden).batch_first(true)))),
        head(register_module("head", nn::Linear(hidden, vocab))) {}
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets, DropoutMasks&) {
    torch::Tensor y = std::get<0>(lstm(embed(tokens)));
    torch::Tensor logits = head(y);
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  nn::Embedding embed;
  nn::LSTM lstm;
  nn::Linear head;
};
TORCH_MODULE(LstmLm);

// A 2-layer bidirectional LSTM between an embedding and a head (torch.nn.LSTM's parameter
// names, the reverse direction's with "_reverse").
struct BiLstmImpl : nn::Module {
  BiLstmImpl(std::int64_t vocab, std::int64_t embed, std::int64_t hidden)
      : embed(register_module("embed", nn::Embedding(vocab, embed))),
        lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(embed, hidden).num_layers(2).batch_first(true).bidirectional(true)))),
        head(register_module("head", nn::Linear(2 * hidden, vocab))) {}
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& targets, DropoutMasks&) {
    torch::Tensor logits = head(std::get<0>(lstm(embed(tokens))));
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  }
  nn::Embedding embed;
  nn::LSTM lstm;
  nn::Linear head;
};
TORCH_MODULE(BiLstm);

// Cross-attention: queries from x [B, S, D], keys and values from enc [B, Skv, E], 4 query heads
// sharing 2 key/value heads (repeat_kv), biases on.
struct CrossAttentionImpl : nn::Module {
  CrossAttentionImpl(std::int64_t d, std::int64_t e, std::int64_t heads, std::int64_t kvHeads)
      : heads(heads), kvHeads(kvHeads) {
    const std::int64_t dh = d / heads;
    auto attn = std::make_shared<nn::Module>();
    q = attn->register_module("q_proj", nn::Linear(d, heads * dh));
    k = attn->register_module("k_proj", nn::Linear(e, kvHeads * dh));
    v = attn->register_module("v_proj", nn::Linear(e, kvHeads * dh));
    o = attn->register_module("o_proj", nn::Linear(heads * dh, d));
    register_module("cross", attn);
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& enc, const torch::Tensor& y) {
    const std::int64_t B = x.size(0), S = x.size(1), Skv = enc.size(1), dh = x.size(2) / heads;
    torch::Tensor qh = q->forward(x).view({B, S, heads, dh}).transpose(1, 2);
    torch::Tensor kh = k->forward(enc).view({B, Skv, kvHeads, dh}).transpose(1, 2).repeat_interleave(heads / kvHeads, 1);
    torch::Tensor vh = v->forward(enc).view({B, Skv, kvHeads, dh}).transpose(1, 2).repeat_interleave(heads / kvHeads, 1);
    torch::Tensor p = torch::softmax(torch::matmul(qh, kh.transpose(2, 3)) / std::sqrt(static_cast<double>(dh)), -1);
    return F::mse_loss(o->forward(torch::matmul(p, vh).transpose(1, 2).reshape({B, S, heads * dh})), y);
  }
  std::int64_t heads, kvHeads;
  nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
};
TORCH_MODULE(CrossAttention);

struct MlpImpl : nn::Module {
  MlpImpl(std::int64_t in, std::int64_t width, std::int64_t out, std::int64_t depth) {
    hidden = register_module("hidden", nn::ModuleList());
    std::int64_t features = in;
    for (std::int64_t i = 0; i < depth; ++i) {
      auto block = std::make_shared<nn::Module>();
      block->register_module("fc", nn::Linear(features, width));
      hidden->push_back(block);
      features = width;
    }
    head = register_module("head", nn::Linear(width, out));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& y, DropoutMasks&) {
    torch::Tensor h = x;
    for (const auto& m : *hidden) h = torch::relu(m->named_children()["fc"]->as<nn::Linear>()->forward(h));
    return F::mse_loss(head(h), y);
  }
  nn::ModuleList hidden{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(Mlp);

// Runs gradc and the reference on the same weights and inputs and compares.
template <class Model>
void checkParity(const std::string& name, const ir::Graph& g, Model ref, const std::string& in0,
                 const std::string& in1) {
  Expected<runtime::TensorMap> init = runtime::initParameters(g, kSeed);
  REQUIRE(init.ok());
  runtime::TensorMap state = *init;
  runtime::TensorMap inputs;
  for (const auto& v : g.inputs()) inputs.emplace(v->name(), runtime::syntheticInput(*v, kSeed, kStep));

  // Same weights in the reference, matched by name, both ways.
  auto refParams = ref->named_parameters();
  CHECK(refParams.size() == state.size());
  {
    torch::NoGradGuard noGrad;
    for (auto& p : refParams) {
      auto it = state.find(p.key());
      REQUIRE_MESSAGE(it != state.end(), "reference parameter " << p.key() << " is not in the gradc graph");
      REQUIRE(p.value().sizes() == it->second.sizes());
      p.value().copy_(it->second);
    }
  }

  Expected<runtime::Executor> exec = runtime::Executor::create(g);
  REQUIRE_MESSAGE(exec.ok(), (exec.ok() ? "" : exec.error().message));
  Expected<runtime::TensorMap> out = exec->run(inputs, state, {kSeed, kStep});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));

  DropoutMasks drop(g);
  torch::Tensor loss = ref->forward(inputs.at(in0), inputs.at(in1), drop);
  CHECK(drop.consumedAll());
  loss.backward();

  auto close = [](const torch::Tensor& ours, const torch::Tensor& theirs, double& relOut) {
    double scale = theirs.abs().max().item<double>();
    double diff = (ours - theirs).abs().max().item<double>();
    relOut = scale > 0 ? diff / scale : diff;
    return diff <= 1e-5 * scale + 1e-6;
  };
  double rel = 0, worst = 0;
  std::string worstName;
  CHECK_MESSAGE(close(out->at("loss"), loss.detach(), rel), name << " loss differs: rel " << rel);
  MESSAGE(name << ": loss gradc " << out->at("loss").item<double>() << " torch " << loss.item<double>()
               << " (rel diff " << rel << ")");
  for (auto& p : refParams) {
    const torch::Tensor& ours = out->at("grad." + p.key());
    REQUIRE(p.value().grad().defined());
    bool ok = close(ours, p.value().grad(), rel);
    CHECK_MESSAGE(ok, name << " grad of " << p.key() << " differs: max rel " << rel);
    if (rel >= worst) {
      worst = rel;
      worstName = p.key();
    }
  }
  MESSAGE(name << ": " << refParams.size() << " parameter gradients, worst max|diff|/max|grad| = " << worst << " ("
               << worstName << ")");
}

}  // namespace

TEST_CASE("model parity: mlp") {
  ir::Graph g = compileModel("mlp", {{"batch", "8"}, {"features", "6"}, {"hidden", "24"}, {"outputs", "3"}, {"depth", "3"}});
  checkParity("mlp", g, Mlp(6, 24, 3, 3), "x", "y");
}

TEST_CASE("model parity: gpt-mini (with embedding dropout), attention decomposed and fused") {
  for (bool fused : {false, true}) {
    ir::Graph g = compileModel("gpt-mini", {{"batch", "2"}, {"seq", "16"}, {"vocab", "64"}, {"d_model", "32"},
                                            {"heads", "4"}, {"layers", "2"}}, fused);
    checkParity(fused ? "gpt-mini (fused attention)" : "gpt-mini", g, GptMini(64, 16, 32, 4, 2), "tokens", "targets");
  }
}

TEST_CASE("model parity: gpt2 reduced (tied LM head, every GPT-2 dropout, tanh GELU)") {
  for (bool fused : {false, true}) {
    ir::Graph g = compileModel("gpt2", {{"batch", "2"}, {"context", "16"}, {"seq", "12"}, {"vocab", "64"},
                                        {"d_model", "32"}, {"heads", "4"}, {"layers", "2"}}, fused);
    // One parameter for the embedding and the head, read by both.
    int readers = 0;
    for (const auto& n : g.nodes())
      if (n->phase() == ir::Phase::fwd)
        for (const ir::Value* v : n->operands()) readers += v->kind() == ir::ValueKind::Param && v->name() == "wte.weight";
    CHECK(readers == 2);
    CHECK(g.findNamed("lm_head.weight") == nullptr);
    checkParity(fused ? "gpt2 (fused attention, dropout on its probabilities)" : "gpt2", g, Gpt2(64, 16, 32, 4, 2),
                "tokens", "targets");
  }
}

TEST_CASE("model parity: llama reduced (RMSNorm, rope, grouped-query attention, SwiGLU)") {
  for (bool fused : {false, true}) {
    ir::Graph g = compileModel("llama", {{"batch", "2"}, {"seq", "12"}, {"vocab", "40"}, {"d_model", "32"},
                                         {"heads", "4"}, {"kv_heads", "2"}, {"layers", "2"}, {"d_ff", "48"}}, fused);
    checkParity(fused ? "llama (fused attention, shared key heads)" : "llama", g, Llama(40, 32, 4, 2, 2, 48), "tokens",
                "targets");
  }
}

// A spec written here, compiled, with its gradients (autodiff, dead code removed).
static ir::Graph specWithGradients(const std::string& text, const std::string& file) {
  frontend::SpecResult r = frontend::compileSpec(text, file);
  REQUIRE_MESSAGE(r.ok(), (r.diagnostics.empty() ? "" : r.diagnostics.back().message));
  ir::Graph g = std::move(*r.graph);
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::DeadCodeElimination>();
  REQUIRE(pm.run(g).ok());
  return g;
}

TEST_CASE("model parity: a 2-layer bidirectional LSTM (torch.nn.LSTM bidirectional=True)") {
  ir::Graph g = specWithGradients(
      "model: bilstm\ndims: {batch: 2, seq: 7, vocab: 20, embed: 6, hidden: 5}\n"
      "inputs:\n  tokens: {shape: [batch, seq], dtype: i64}\n  targets: {shape: [batch, seq], dtype: i64}\n"
      "layers:\n  - {op: embedding, name: embed, input: tokens, num: vocab, dim: embed}\n"
      "  - {op: lstm, name: lstm, hidden: hidden, layers: 2, bidirectional: true}\n"
      "  - {op: linear, name: head, out: vocab}\n"
      "loss: {op: cross_entropy, target: targets}\n",
      "bilstm.yaml");
  CHECK(g.findNamed("lstm.weight_hh_l1_reverse") != nullptr);
  checkParity("bidirectional lstm", g, BiLstm(20, 6, 5), "tokens", "targets");
}

TEST_CASE("model parity: cross-attention (kv_input, grouped keys and values, another sequence length)") {
  ir::Graph g = specWithGradients(
      "model: cross\ndims: {batch: 2, seq: 5, seq_kv: 7, d: 16, e: 12}\n"
      "inputs:\n  x: {shape: [batch, seq, d]}\n  enc: {shape: [batch, seq_kv, e]}\n  y: {shape: [batch, seq, d]}\n"
      "layers:\n  - {op: attention, name: cross, input: x, kv_input: enc, heads: 4, kv_heads: 2}\n"
      "loss: {op: mse, target: y}\n",
      "cross.yaml");
  CHECK(g.findNamed("cross.k_proj.weight")->type().shape == ir::Shape{8, 12});

  Expected<runtime::TensorMap> init = runtime::initParameters(g, kSeed);
  REQUIRE(init.ok());
  CrossAttention ref(16, 12, 4, 2);
  {
    torch::NoGradGuard noGrad;
    for (auto& p : ref->named_parameters()) p.value().copy_(init->at(p.key()));
  }
  runtime::TensorMap inputs;
  for (const auto& v : g.inputs()) inputs.emplace(v->name(), runtime::syntheticInput(*v, kSeed, kStep));
  Expected<runtime::Executor> exec = runtime::Executor::create(g);
  REQUIRE(exec.ok());
  Expected<runtime::TensorMap> out = exec->run(inputs, *init, {kSeed, kStep});
  REQUIRE(out.ok());
  torch::Tensor loss = ref->forward(inputs.at("x"), inputs.at("enc"), inputs.at("y"));
  loss.backward();
  CHECK(std::abs(out->at("loss").item<double>() - loss.item<double>()) <= 1e-5 * std::abs(loss.item<double>()));
  for (auto& p : ref->named_parameters()) {
    CAPTURE(p.key());
    const torch::Tensor& theirs = p.value().grad();
    const double scale = theirs.abs().max().item<double>();
    CHECK((out->at("grad." + p.key()) - theirs).abs().max().item<double>() <= 1e-5 * scale + 1e-6);
  }
}

TEST_CASE("model parity: layer_norm over the last two axes (nn.LayerNorm([H, W]))") {
  ir::Graph g = specWithGradients(
      "model: ln2\ndims: {batch: 3}\n"
      "inputs:\n  x: {shape: [batch, 2, 4, 5]}\n  y: {shape: [batch, 2, 4, 5]}\n"
      "layers:\n  - {op: layer_norm, name: ln, input: x, axes: 2}\n"
      "  - {op: layer_norm, name: ln3, axes: 3, bias: false}\n"
      "loss: {op: mse, target: y}\n",
      "ln2.yaml");
  CHECK(g.findNamed("ln.weight")->type().shape == ir::Shape{4, 5});  // PyTorch's names and layouts
  CHECK(g.findNamed("ln3.weight")->type().shape == ir::Shape{2, 4, 5});
  CHECK(g.findNamed("ln3.bias") == nullptr);
  Expected<runtime::TensorMap> init = runtime::initParameters(g, kSeed);
  REQUIRE(init.ok());
  runtime::TensorMap inputs;
  for (const auto& v : g.inputs()) inputs.emplace(v->name(), runtime::syntheticInput(*v, kSeed, kStep));
  // Parameters away from their ones and zeros, so that their gradients matter.
  for (auto& [name, t] : *init) t.add_(torch::rand_like(t) * 0.5);
  Expected<runtime::Executor> exec = runtime::Executor::create(g);
  REQUIRE(exec.ok());
  Expected<runtime::TensorMap> out = exec->run(inputs, *init, {kSeed, kStep});
  REQUIRE(out.ok());
  torch::Tensor w = init->at("ln.weight").clone().requires_grad_(), b = init->at("ln.bias").clone().requires_grad_();
  torch::Tensor w3 = init->at("ln3.weight").clone().requires_grad_();
  torch::Tensor x = inputs.at("x").clone().requires_grad_();
  torch::Tensor h = torch::layer_norm(x, {4, 5}, w, b, 1e-5);
  torch::Tensor loss = torch::mse_loss(torch::layer_norm(h, {2, 4, 5}, w3, {}, 1e-5), inputs.at("y"));
  loss.backward();
  CHECK(std::abs(out->at("loss").item<double>() - loss.item<double>()) <= 1e-5 * std::abs(loss.item<double>()));
  for (auto [name, theirs] : {std::pair{"ln.weight", w.grad()}, std::pair{"ln.bias", b.grad()},
                              std::pair{"ln3.weight", w3.grad()}}) {
    CAPTURE(name);
    const double scale = theirs.abs().max().item<double>();
    CHECK((out->at(std::string("grad.") + name) - theirs).abs().max().item<double>() <= 1e-5 * scale + 1e-7);
  }
}

TEST_CASE("model parity: lstm-lm") {
  ir::Graph g = compileModel("lstm-lm", {{"batch", "2"}, {"seq", "12"}, {"vocab", "32"}, {"embed", "8"}, {"hidden", "16"}});
  checkParity("lstm-lm", g, LstmLm(32, 8, 16), "tokens", "targets");
}

TEST_CASE("model parity: lm-seed reduced (attention and residual dropout)") {
  for (bool fused : {false, true}) {
    ir::Graph g = compileModel("lm-seed", {{"batch", "2"}, {"seq", "10"}, {"vocab", "50"}, {"d_model", "24"},
                                           {"heads", "3"}, {"layers", "2"}}, fused);
    checkParity(fused ? "lm-seed (fused attention)" : "lm-seed", g, LmSeed(50, 10, 24, 3, 2), "tokens", "targets");
  }
}
