// The spec frontend on valid specs: the bundled models, parameter names and layouts, --set
// overrides, repeat scoping, the lowering of composite layers, and the op documentation.
#include "frontend/spec.h"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "frontend/spec_ops.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

using namespace gradc;
using frontend::compileSpec;
using frontend::compileSpecFile;
using frontend::SpecOptions;
using frontend::SpecResult;

namespace {

std::string modelPath(const std::string& name) { return std::string(GRADC_SOURCE_DIR) + "/models/" + name; }

std::string messages(const SpecResult& r) {
  std::string out;
  for (const auto& d : r.diagnostics) out += d.message + " [" + d.hint + "]\n";
  return out;
}

// Compiles a spec that must compile without errors or warnings, and checks the IR invariants.
ir::Graph compileClean(const std::string& text, const SpecOptions& options = {}) {
  SpecResult r = compileSpec(text, "test.yaml", options);
  INFO(messages(r));
  REQUIRE(r.ok());
  CHECK(r.diagnostics.empty());
  Status s = ir::verify(*r.graph);
  INFO(s.message());
  CHECK(s.ok());
  return std::move(*r.graph);
}

ir::Graph compileModel(const std::string& name, const SpecOptions& options = {}) {
  SpecResult r = compileSpecFile(modelPath(name), options);
  INFO(name << ":\n" << messages(r));
  REQUIRE(r.ok());
  CHECK(r.diagnostics.empty());
  Status s = ir::verify(*r.graph);
  INFO(s.message());
  CHECK(s.ok());
  return std::move(*r.graph);
}

const ir::Value* param(const ir::Graph& g, const std::string& name) {
  for (const auto& p : g.params())
    if (p->name() == name) return p.get();
  return nullptr;
}

std::string paramType(const ir::Graph& g, const std::string& name) {
  const ir::Value* p = param(g, name);
  return p ? ir::toString(p->type()) : "<no parameter " + name + ">";
}

std::int64_t paramCount(const ir::Graph& g) {
  std::int64_t n = 0;
  for (const auto& p : g.params()) n += p->type().numel();
  return n;
}

std::vector<const ir::Node*> nodesOf(const ir::Graph& g, std::string_view op) {
  std::vector<const ir::Node*> out;
  for (const auto& n : g.nodes())
    if (n->opName() == op) out.push_back(n.get());
  return out;
}

const char* kTinyHeader = R"(
model: t
dims: {batch: 2, seq: 4, d: 8}
inputs:
  x: {shape: [batch, seq, d], dtype: f32}
  y: {shape: [batch, seq, d], dtype: f32}
)";

}  // namespace

TEST_CASE("every bundled model compiles cleanly and round-trips through the IR text") {
  for (const char* name : {"mlp.yaml", "gpt-mini.yaml", "lstm-lm.yaml", "lm-seed.yaml"}) {
    CAPTURE(name);
    ir::Graph g = compileModel(name);
    REQUIRE(g.findOutput("loss") != nullptr);
    CHECK(ir::toString(g.findOutput("loss")->type()) == "f32[]");
    std::string text = ir::printGraph(g);
    Expected<ir::Graph> parsed = ir::parseGraph(text, name);
    INFO((parsed ? std::string() : parsed.error().message));
    REQUIRE(parsed.ok());
    CHECK(ir::printGraph(parsed.value()) == text);
  }
}

TEST_CASE("gpt-mini: parameter names, PyTorch layouts and the exact parameter count") {
  ir::Graph g = compileModel("gpt-mini.yaml");
  CHECK(g.name() == "gpt-mini");
  CHECK(ir::getString(g.attrs(), "model") == "gpt-mini");
  CHECK(ir::getInt(g.attrs(), "seed") == 0);
  CHECK(paramType(g, "wte.weight") == "f32[256, 256]");
  CHECK(paramType(g, "wpe.weight") == "f32[128, 256]");
  CHECK(paramType(g, "blocks.3.attn.qkv.weight") == "f32[768, 256]");
  CHECK(paramType(g, "blocks.3.attn.qkv.bias") == "f32[768]");
  CHECK(paramType(g, "blocks.3.attn.proj.weight") == "f32[256, 256]");
  CHECK(paramType(g, "blocks.0.fc1.weight") == "f32[1024, 256]");
  CHECK(paramType(g, "blocks.0.fc2.weight") == "f32[256, 1024]");
  CHECK(paramType(g, "blocks.2.ln2.bias") == "f32[256]");
  CHECK(paramType(g, "ln_f.weight") == "f32[256]");
  CHECK(paramType(g, "lm_head.weight") == "f32[256, 256]");
  CHECK(param(g, "lm_head.bias") == nullptr);
  CHECK(param(g, "blocks.4.ln1.weight") == nullptr);
  // Per block: 2 layer norms (2 x 512) + qkv (768 x 257) + proj (256 x 257) + fc1 (1024 x 257)
  // + fc2 (256 x 1025) = 789,760; plus wte 65,536, wpe 32,768, ln_f 512, lm_head 65,536.
  CHECK(g.params().size() == 53);
  CHECK(paramCount(g) == 4 * 789'760 + 65'536 + 32'768 + 512 + 65'536);

  // Initialisers follow PyTorch's defaults.
  CHECK(ir::getString(param(g, "wte.weight")->attrs(), "init") == "normal");
  CHECK(ir::getFloat(param(g, "wte.weight")->attrs(), "std") == 1.0);
  CHECK(ir::getString(param(g, "blocks.0.fc2.weight")->attrs(), "init") == "uniform");
  CHECK(ir::getFloat(param(g, "blocks.0.fc2.weight")->attrs(), "bound") == doctest::Approx(1.0 / 32));
  CHECK(ir::getString(param(g, "blocks.0.ln1.weight")->attrs(), "init") == "ones");
  CHECK(ir::getString(param(g, "blocks.0.ln1.bias")->attrs(), "init") == "zeros");

  // The residual stream: each block's second add reads the first add's output.
  std::vector<const ir::Node*> adds;
  for (const auto& n : g.nodes())
    if (n->opName() == "add" && n->specName().rfind("blocks.1.", 0) == 0) adds.push_back(n.get());
  REQUIRE(adds.size() == 2);
  CHECK(adds[1]->operand(0) == adds[0]->result(0));
  CHECK(adds[0]->operand(1)->producer()->specName() == "blocks.1.attn");
}

TEST_CASE("mlp: a repeat of linear + relu and a regression head") {
  ir::Graph g = compileModel("mlp.yaml");
  CHECK(paramType(g, "hidden.0.fc.weight") == "f32[256, 32]");
  CHECK(paramType(g, "hidden.3.fc.weight") == "f32[256, 256]");
  CHECK(paramType(g, "head.weight") == "f32[8, 256]");
  CHECK(paramType(g, "head.bias") == "f32[8]");
  CHECK(param(g, "hidden.4.fc.weight") == nullptr);
  CHECK(nodesOf(g, "relu").size() == 4);
  CHECK(nodesOf(g, "mse").size() == 1);
}

TEST_CASE("lm-seed: the article's logits are f32[32, 250, 40000]") {
  ir::Graph g = compileModel("lm-seed.yaml");
  const ir::Node* head = nullptr;
  for (const auto& n : g.nodes())
    if (n->specName() == "lm_head") head = n.get();
  REQUIRE(head != nullptr);
  CHECK(ir::toString(head->result()->type()) == "f32[32, 250, 40000]");
  CHECK(head->result()->type().bytes() == 1'280'000'000);
  CHECK(paramType(g, "lm_head.weight") == "f32[40000, 768]");
  CHECK(paramCount(g) == 146'686'464);
}

TEST_CASE("--set replaces a dim before evaluation, so dependent dims follow") {
  SpecOptions options;
  options.overrides = {{"d_model", "512"}, {"layers", "2"}, {"seed", "7"}};
  ir::Graph g = compileModel("gpt-mini.yaml", options);
  CHECK(paramType(g, "blocks.1.fc1.weight") == "f32[2048, 512]");  // d_ff: 4 * d_model
  CHECK(paramType(g, "blocks.1.attn.qkv.weight") == "f32[1536, 512]");
  CHECK(param(g, "blocks.2.ln1.weight") == nullptr);
  CHECK(ir::getInt(g.attrs(), "seed") == 7);

  // An override may itself use earlier dims.
  options.overrides = {{"d_ff", "2 * d_model"}};
  ir::Graph g2 = compileModel("gpt-mini.yaml", options);
  CHECK(paramType(g2, "blocks.0.fc1.weight") == "f32[512, 256]");
}

TEST_CASE("lstm-lm: torch.nn.LSTM parameter names and an unrolled sequence") {
  ir::Graph g = compileModel("lstm-lm.yaml");
  CHECK(paramType(g, "lstm.weight_ih_l0") == "f32[1024, 128]");
  CHECK(paramType(g, "lstm.weight_hh_l0") == "f32[1024, 256]");
  CHECK(paramType(g, "lstm.bias_ih_l0") == "f32[1024]");
  CHECK(paramType(g, "lstm.bias_hh_l0") == "f32[1024]");
  CHECK(ir::getFloat(param(g, "lstm.weight_hh_l0")->attrs(), "bound") == doctest::Approx(1.0 / 16));
  std::vector<const ir::Node*> stacks = nodesOf(g, "stack");
  REQUIRE(stacks.size() == 1);
  CHECK(stacks[0]->operands().size() == 512);
  CHECK(ir::toString(stacks[0]->result()->type()) == "f32[8, 512, 256]");
  // One unbind hands out the 512 time steps of the input projection (its gradient is one stack).
  std::vector<const ir::Node*> unbinds = nodesOf(g, "unbind");
  REQUIRE(unbinds.size() == 1);
  CHECK(unbinds[0]->numResults() == 512);
  CHECK(nodesOf(g, "select").empty());
  std::set<std::string> specNames;
  for (const auto& n : g.nodes()) specNames.insert(n->specName());
  CHECK(specNames.count("lstm.step.0"));
  CHECK(specNames.count("lstm.step.511"));
}

TEST_CASE("a two-layer lstm feeds the hidden state of layer 0 into layer 1") {
  ir::Graph g = compileClean(std::string(kTinyHeader) + R"(
layers:
  - {op: lstm, name: rnn, input: x, hidden: 6, layers: 2}
  - {op: linear, out: d}
loss: {op: mse, target: y}
)");
  CHECK(paramType(g, "rnn.weight_ih_l0") == "f32[24, 8]");
  CHECK(paramType(g, "rnn.weight_ih_l1") == "f32[24, 6]");
  CHECK(paramType(g, "rnn.weight_hh_l1") == "f32[24, 6]");
  std::set<std::string> specNames;
  for (const auto& n : g.nodes()) specNames.insert(n->specName());
  CHECK(specNames.count("rnn.l1.step.3"));
  CHECK(nodesOf(g, "zeros").size() == 2);
}

TEST_CASE("dropout RNG ids are distinct and assigned in lowering order") {
  ir::Graph g = compileModel("lm-seed.yaml");
  std::vector<const ir::Node*> drops = nodesOf(g, "dropout");
  // Embedding dropout, then per block: attention probabilities, after attention, after the MLP.
  REQUIRE(drops.size() == 1 + 12 * 3);
  for (size_t i = 0; i < drops.size(); ++i) CHECK(ir::getInt(drops[i]->attrs(), "rng") == std::int64_t(i));
  CHECK(drops[1]->specName() == "blocks.0.attn");
}

TEST_CASE("attention lowers to primitive ops named after the layer") {
  ir::Graph g = compileClean(std::string(kTinyHeader) + R"(
layers:
  - {op: attention, name: attn, input: x, heads: 2, causal: true}
  - {op: add, inputs: [x, _]}
loss: {op: mse, target: y}
)");
  std::vector<std::string> ops;
  for (const auto& n : g.nodes())
    if (n->specName() == "attn") ops.emplace_back(n->opName());
  CHECK(ops == std::vector<std::string>{"linear", "split", "reshape", "transpose", "reshape", "transpose", "reshape",
                                         "transpose", "transpose", "matmul", "scale", "causal_mask", "softmax",
                                         "matmul", "transpose", "reshape", "linear"});
  const ir::Node* scale = nodesOf(g, "scale").at(0);
  CHECK(ir::getFloat(scale->attrs(), "factor") == doctest::Approx(0.5));  // 1 / sqrt(8 / 2)
  CHECK(ir::toString(nodesOf(g, "softmax").at(0)->result()->type()) == "f32[2, 2, 4, 4]");
}

TEST_CASE("repeat: scopes, x and _, nesting, and names local to an iteration") {
  ir::Graph g = compileClean(std::string(kTinyHeader) + R"(
layers:
  - repeat: 2
    name: outer
    input: x
    layers:
      - repeat: 3
        name: inner
        layers:
          - {op: linear, name: fc, out: d, output: h}
          - {op: add, inputs: [x, h]}
      - {op: relu}
loss: {op: mse, target: y}
)");
  CHECK(paramType(g, "outer.1.inner.2.fc.weight") == "f32[8, 8]");
  CHECK(param(g, "outer.2.inner.0.fc.weight") == nullptr);
  CHECK(nodesOf(g, "linear").size() == 6);
  // Inner iteration 1 reads x = the output of iteration 0's add.
  std::vector<const ir::Node*> adds = nodesOf(g, "add");
  REQUIRE(adds.size() == 6);
  CHECK(adds[1]->operand(0) == adds[0]->result(0));
  CHECK(adds[1]->specName() == "outer.0.inner.1.add_1");

  // A name bound inside an iteration is not visible after the repeat.
  SpecResult r = compileSpec(std::string(kTinyHeader) + R"(
layers:
  - repeat: 2
    input: x
    layers:
      - {op: relu, output: inside}
  - {op: add, inputs: [inside, x]}
loss: {op: mse, target: y}
)",
                             "t.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.diagnostics.at(0).message == "'inside' is not defined at this point");
}

TEST_CASE("unnamed layers are named <op>_<index> in their list") {
  ir::Graph g = compileClean(std::string(kTinyHeader) + R"(
layers:
  - {op: linear, input: x, out: d}
  - {op: gelu, approximate: tanh}
  - {op: scale, by: 0.5}
  - {op: softmax}
  - {op: log_softmax, dim: 1}
  - {op: reshape, shape: [batch, -1]}
  - {op: reshape, shape: [batch, seq, d]}
  - {op: transpose, dims: [-1, 1]}
  - {op: transpose, dims: [1, 2]}
  - {op: sigmoid}
  - {op: tanh}
  - {op: mul, inputs: [_, y]}
  - {op: sub, inputs: [_, x]}
  - {op: dropout, p: 0.0}
loss: {op: mse, target: y}
)");
  CHECK(paramType(g, "linear_0.weight") == "f32[8, 8]");
  std::vector<std::string> names;
  for (const auto& n : g.nodes()) names.push_back(n->specName());
  CHECK(names == std::vector<std::string>{"linear_0", "gelu_1", "scale_2", "softmax_3", "log_softmax_4",
                                           "reshape_5", "reshape_6", "transpose_7", "transpose_8", "sigmoid_9",
                                           "tanh_10", "mul_11", "sub_12", "loss"});
  CHECK(ir::getString(nodesOf(g, "gelu")[0]->attrs(), "approximate") == "tanh");
  CHECK(ir::getInt(nodesOf(g, "softmax")[0]->attrs(), "dim") == 2);  // -1 normalised
  CHECK(ir::getIntList(nodesOf(g, "reshape")[0]->attrs(), "shape") == std::vector<std::int64_t>{2, 32});
  CHECK(ir::getInt(nodesOf(g, "transpose")[0]->attrs(), "dim0") == 2);
  CHECK(nodesOf(g, "dropout").empty());  // p = 0 is the identity
}

TEST_CASE("pos_embedding slices a longer table to the sequence length") {
  ir::Graph g = compileClean(R"(
model: t
dims: {batch: 2, seq: 4, d: 8, vocab: 10}
inputs:
  tokens: {shape: [batch, seq], dtype: i64}
  targets: {shape: [batch, seq], dtype: i64}
layers:
  - {op: embedding, name: wte, input: tokens, num: vocab, dim: d}
  - {op: pos_embedding, name: wpe, length: 2 * seq}
  - {op: linear, name: head, out: vocab}
loss: {op: cross_entropy, target: targets}
)");
  CHECK(paramType(g, "wpe.weight") == "f32[8, 8]");
  std::vector<const ir::Node*> slices = nodesOf(g, "slice");
  REQUIRE(slices.size() == 1);
  CHECK(ir::getInt(slices[0]->attrs(), "end") == 4);
  CHECK(ir::toString(slices[0]->result()->type()) == "f32[4, 8]");
  CHECK(slices[0]->specName() == "wpe");
}

TEST_CASE("model dtype, input dtype defaults and quoted expressions") {
  ir::Graph g = compileClean(R"(
model: half-model
dims: {n: 4}
dtype: bf16
inputs:
  a: {shape: ["2 * n", n]}
  b: {shape: [8, 4]}
layers:
  - {op: linear, input: a, out: "n", bias: false}
loss: {op: mse, target: b}
)");
  CHECK(ir::toString(g.inputs()[0]->type()) == "bf16[8, 4]");
  CHECK(paramType(g, "linear_0.weight") == "bf16[4, 4]");
}

TEST_CASE("the SPEC.md draft's discarded attention output is reported as a warning") {
  SpecResult r = compileSpec(std::string(kTinyHeader) + R"(
layers:
  - repeat: 2
    name: blocks
    input: x
    layers:
      - {op: layer_norm, name: ln1, output: h}
      - {op: attention, name: attn, heads: 2, causal: true}
      - {op: add, inputs: [x, h], output: x}
loss: {op: mse, target: y}
)",
                             "draft.yaml");
  REQUIRE(r.ok());
  REQUIRE(r.diagnostics.size() == 1);  // once, though the block is lowered twice
  const auto& d = r.diagnostics[0];
  CHECK(d.severity == frontend::Severity::Warning);
  CHECK(d.line == 14);
  CHECK(d.column == 14);
  CHECK(d.message == "the output of layer 'blocks.0.attn' (attention) is never used");
}

TEST_CASE("docs/spec.md documents every op and attribute") {
  std::ifstream file(std::string(GRADC_SOURCE_DIR) + "/docs/spec.md");
  REQUIRE(file);
  std::stringstream text;
  text << file.rdbuf();
  std::string doc = text.str();
  for (const frontend::SpecOp& op : frontend::specOps()) {
    CAPTURE(op.name);
    CHECK(doc.find("### `" + std::string(op.name) + "`") != std::string::npos);
    for (const frontend::SpecAttr& a : op.attrs) {
      CAPTURE(a.name);
      CHECK(doc.find("`" + std::string(a.name) + "`") != std::string::npos);
    }
  }
}

TEST_CASE("the transformer-model layers: tie, split, concat, sum, mean, layer_norm without affine, rms_norm, swiglu") {
  const std::string head =
      "model: t\n"
      "dims: {batch: 2, seq: 4, d: 8, vocab: 10}\n"
      "inputs:\n"
      "  tokens: {shape: [batch, seq], dtype: i64}\n"
      "  y: {shape: [batch, seq, vocab]}\n"
      "layers:\n"
      "  - {op: embedding, name: wte, input: tokens, num: vocab, dim: d}\n";
  ir::Graph g = compileClean(head +
                             "  - {op: split, sections: 2, part: 1, output: right}\n"
                             "  - {op: concat, inputs: [right, right], dim: -1}\n"
                             "  - {op: layer_norm, name: ln, affine: false}\n"
                             "  - {op: rms_norm, name: rms}\n"
                             "  - {op: swiglu, name: mlp, hidden: 12, output: h}\n"
                             "  - {op: mean, dims: [-1], keepdim: true, output: m}\n"
                             "  - {op: sub, inputs: [h, m]}\n"
                             "  - {op: linear, name: head, tie: wte}\n"
                             "loss: {op: mse, target: y}\n");
  std::set<std::string> params;
  for (const auto& p : g.params()) params.insert(p->name());
  CHECK(params == std::set<std::string>{"wte.weight", "rms.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                        "mlp.down_proj.weight", "head.bias"});
  std::map<std::string, int> ops;
  for (const auto& n : g.nodes()) ++ops[std::string(n->opName())];
  CHECK(ops["split"] == 1);
  CHECK(ops["concat"] == 1);
  CHECK(ops["full"] == 2);  // layer_norm's constant weight and bias
  CHECK(ops["mean"] == 1);
  CHECK(ops["silu"] == 1);
  CHECK(ops["rms_norm"] == 1);

  auto failing = [&](const std::string& layers) {
    SpecResult r = compileSpec(head + layers + "loss: {op: mse, target: y}\n", "t.yaml");
    REQUIRE_FALSE(r.ok());
    return r.diagnostics.back().message;
  };
  // concat takes two or more inputs, in order.
  ir::Graph three = compileClean(head +
                                 "  - {op: split, sections: 4, part: 0, output: a}\n"
                                 "  - {op: concat, inputs: [a, _, a], dim: -1}\n"
                                 "  - {op: linear, name: head, out: vocab}\n"
                                 "loss: {op: mse, target: y}\n");
  const ir::Node* cat = nullptr;
  for (const auto& n : three.nodes())
    if (n->opName() == "concat") cat = n.get();
  REQUIRE(cat);
  CHECK(cat->numOperands() == 3);
  CHECK(cat->result(0)->type().shape == ir::Shape{2, 4, 6});
  CHECK(failing("  - {op: concat, inputs: [_], dim: -1}\n").find("concat takes two or more inputs") != std::string::npos);
  CHECK(failing("  - {op: split, sections: 3, part: 0}\n").find("does not split into 3 equal parts") != std::string::npos);
  CHECK(failing("  - {op: split, sections: 2, part: 2}\n").find("part 2 is not one of the 2 parts") != std::string::npos);
  CHECK(failing("  - {op: sum, dims: [1, -2]}\n").find("is listed twice") != std::string::npos);
  CHECK(failing("  - {op: linear, name: head, tie: head}\n").find("no earlier layer defines that parameter") !=
        std::string::npos);
  CHECK(failing("  - {op: linear, name: fc, out: 3}\n  - {op: linear, name: head, tie: fc}\n")
            .find("needs a weight with 3 columns") != std::string::npos);
}

TEST_CASE("image windows: kernel, stride, padding and dilation are one value or [height, width]") {
  const std::string head =
      "model: img\n"
      "dims: {batch: 2}\n"
      "inputs:\n"
      "  images: {shape: [batch, 3, 12, 10]}\n"
      "  y: {shape: [batch, 4, 3, 5]}\n"
      "layers:\n";
  ir::Graph g = compileClean(head +
                             "  - {op: conv2d, name: c, input: images, out: 4, kernel: [3, 5], stride: [2, 1], "
                             "padding: [1, 2], dilation: [1, 1]}\n"
                             "  - {op: max_pool2d, kernel: [2, 1], stride: [2, 2]}\n"
                             "  - {op: avg_pool2d, kernel: 1, padding: [0, 0]}\n"
                             "loss: {op: mse, target: y}\n");
  const ir::Value* w = g.findNamed("c.weight");
  REQUIRE(w);
  CHECK(w->type().shape == ir::Shape{4, 3, 3, 5});  // torch.nn.Conv2d(3, 4, (3, 5)).weight
  for (const auto& n : g.nodes()) {
    const auto list = [&](const char* key) { return *ir::getIntList(n->attrs(), key); };
    using L = std::vector<std::int64_t>;
    if (n->opName() == "conv2d") {
      CHECK(list("stride") == L{2, 1});
      CHECK(list("padding") == L{1, 2});
      CHECK(n->result(0)->type().shape == ir::Shape{2, 4, 6, 10});  // (12 + 2 - 3) / 2 + 1, (10 + 4 - 5) + 1
    } else if (n->opName() == "max_pool2d") {
      CHECK(list("kernel") == L{2, 1});
      CHECK(list("stride") == L{2, 2});
      CHECK(n->result(0)->type().shape == ir::Shape{2, 4, 3, 5});
    } else if (n->opName() == "avg_pool2d") {
      CHECK(list("kernel") == L{1, 1});
      CHECK(list("stride") == L{1, 1});  // the kernel's, as PyTorch's default
    }
  }
  auto failing = [&](const std::string& layer) {
    SpecResult r = compileSpec(head + layer + "loss: {op: mse, target: y}\n", "img.yaml");
    REQUIRE_FALSE(r.ok());
    return r.diagnostics.back().message;
  };
  CHECK(failing("  - {op: conv2d, input: images, out: 4, kernel: [3, 5, 7]}\n")
            .find("takes one value or a list of two, [height, width]; got a list of 3") != std::string::npos);
  CHECK(failing("  - {op: conv2d, input: images, out: 4, kernel: 3, padding: [1, -1]}\n")
            .find("must be >= 0, got -1") != std::string::npos);
  CHECK(failing("  - {op: conv2d, input: images, out: 4, kernel: [3, 0]}\n").find("kernel") != std::string::npos);
}

TEST_CASE("adaptive_avg_pool2d: any size; sizes that divide the input become avg_pool2d, on any map") {
  auto pooled = [](const std::string& size, const std::string& map, int outputs) {
    ir::Graph g = compileClean("model: img\ndims: {batch: 2}\ninputs:\n  images: {shape: [batch, 3, " + map +
                               "]}\n  y: {shape: [batch, " + std::to_string(outputs) +
                               "]}\nlayers:\n  - {op: adaptive_avg_pool2d, input: images, size: " + size +
                               "}\n  - {op: flatten}\nloss: {op: mse, target: y}\n");
    REQUIRE(!g.nodes().empty());
    return std::pair{std::string(g.nodes().front()->opName()), g.nodes().front()->result(0)->type().shape};
  };
  CHECK(pooled("1", "12, 10", 3) == std::pair{std::string("avg_pool2d"), ir::Shape{2, 3, 1, 1}});  // global, not square
  CHECK(pooled("[3, 5]", "12, 10", 45) == std::pair{std::string("avg_pool2d"), ir::Shape{2, 3, 3, 5}});
  CHECK(pooled("[5, 3]", "12, 10", 45) == std::pair{std::string("adaptive_avg_pool2d"), ir::Shape{2, 3, 5, 3}});
  CHECK(pooled("7", "12, 10", 147) == std::pair{std::string("adaptive_avg_pool2d"), ir::Shape{2, 3, 7, 7}});
}

TEST_CASE("layer_norm axes: N normalises the last N axes with parameters of their shape; N out of range is refused") {
  const std::string head = "model: ln\ndims: {batch: 2}\ninputs:\n  x: {shape: [batch, 3, 4]}\n  y: {shape: [batch, 3, 4]}\n"
                           "layers:\n";
  ir::Graph g = compileClean(head + "  - {op: layer_norm, name: ln, input: x, axes: 2}\nloss: {op: mse, target: y}\n");
  CHECK(g.findNamed("ln.weight")->type().shape == ir::Shape{3, 4});
  CHECK(g.findNamed("ln.bias")->type().shape == ir::Shape{3, 4});
  const ir::Node* norm = nullptr;
  for (const auto& n : g.nodes())
    if (n->opName() == "layer_norm") norm = n.get();
  REQUIRE(norm);
  CHECK(norm->operand(0)->type().shape == ir::Shape{2, 12});  // viewed as [..., D]
  CHECK(norm->result(0)->uses().front().user->opName() == "reshape");
  for (std::string bad : {"0", "4"}) {
    CAPTURE(bad);
    SpecResult r = compileSpec(head + "  - {op: layer_norm, input: x, axes: " + bad + "}\nloss: {op: mse, target: y}\n",
                               "ln.yaml");
    REQUIRE_FALSE(r.ok());
    CHECK(r.diagnostics.back().message.find(bad == "0" ? "must be a positive integer" : "normalises the last 4 axes") !=
          std::string::npos);
  }
}

TEST_CASE("batch_norm momentum: null is the cumulative average (PyTorch's None); other values stay in [0, 1]") {
  const std::string head = "model: bn\ndims: {batch: 2}\ninputs:\n  x: {shape: [batch, 3, 4, 4]}\n"
                           "  y: {shape: [batch, 3, 4, 4]}\nlayers:\n";
  ir::Graph g = compileClean(head + "  - {op: batch_norm, name: bn, input: x, momentum: null}\nloss: {op: mse, target: y}\n");
  const ir::Node* update = nullptr;
  for (const auto& n : g.nodes())
    if (n->opName() == "running_stats_update") update = n.get();
  REQUIRE(update);
  CHECK(ir::getBool(update->attrs(), "cumulative") == true);
  SpecResult r = compileSpec(head + "  - {op: batch_norm, input: x, momentum: 2}\nloss: {op: mse, target: y}\n", "bn.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.diagnostics.back().message.find("must be in [0, 1] or null") != std::string::npos);
}

TEST_CASE("layer_norm bias: false learns a weight only, as nn.LayerNorm(bias=False)") {
  ir::Graph g = compileClean(
      "model: ln\n"
      "dims: {batch: 2, d: 6}\n"
      "inputs:\n"
      "  x: {shape: [batch, d]}\n"
      "  y: {shape: [batch, d]}\n"
      "layers:\n"
      "  - {op: layer_norm, name: ln, input: x, bias: false}\n"
      "loss: {op: mse, target: y}\n");
  std::set<std::string> params;
  for (const auto& p : g.params()) params.insert(p->name());
  CHECK(params == std::set<std::string>{"ln.weight"});
  const ir::Node* norm = nullptr;
  for (const auto& n : g.nodes())
    if (n->opName() == "layer_norm") norm = n.get();
  REQUIRE(norm);
  CHECK(norm->operand(1)->name() == "ln.weight");
  const ir::Node* bias = norm->operand(2)->producer();
  REQUIRE(bias);
  CHECK(bias->opName() == "full");
  CHECK(*ir::getFloat(bias->attrs(), "value") == 0.0);
}
