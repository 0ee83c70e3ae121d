// Every mistake a spec can contain is reported with file:line:col (1-based), a message that
// names what is wrong, and a hint where one helps. No input throws, crashes or hangs.
#include <doctest/doctest.h>

#include <string>

#include "frontend/spec.h"

using namespace gradc;
using frontend::compileSpec;
using frontend::Diagnostic;
using frontend::Severity;
using frontend::SpecOptions;
using frontend::SpecResult;

namespace {

// Lines 1-6; layers start on line 7.
const std::string kHead =
    "model: t\n"
    "dims: {batch: 2, seq: 4, d: 8, vocab: 10}\n"
    "inputs:\n"
    "  x: {shape: [batch, seq, d]}\n"
    "  y: {shape: [batch, seq, d]}\n"
    "layers:\n";
const std::string kMse = "loss: {op: mse, target: y}\n";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Compiles text that must fail; returns the (single) error.
Diagnostic error(const std::string& text, const SpecOptions& options = {}) {
  SpecResult r = compileSpec(text, "bad.yaml", options);
  REQUIRE_FALSE(r.ok());
  REQUIRE_FALSE(r.diagnostics.empty());
  const Diagnostic& d = r.diagnostics.back();
  CHECK(d.severity == Severity::Error);
  INFO(frontend::formatDiagnostic(d, text));
  return d;
}

#define CHECK_AT(diag, l, c)   \
  do {                         \
    CHECK((diag).line == (l)); \
    CHECK((diag).column == (c)); \
  } while (0)

}  // namespace

TEST_CASE("unknown op: close matches, or the list of ops") {
  Diagnostic d = error(kHead + "  - {op: lienar, input: x, out: 4}\n" + kMse);
  CHECK_AT(d, 7, 10);
  CHECK(d.message == "unknown op 'lienar'");
  CHECK(d.hint == "did you mean 'linear'?");

  d = error(kHead + "  - op: frobnicate\n    input: x\n" + kMse);
  CHECK_AT(d, 7, 9);
  CHECK(contains(d.hint, "the ops are 'linear', 'embedding'"));
}

TEST_CASE("unknown attribute of an op, with a close match") {
  Diagnostic d = error(kHead + "  - {op: linear, input: x, outt: 4}\n" + kMse);
  CHECK_AT(d, 7, 28);
  CHECK(d.message == "linear has no attribute 'outt'");
  CHECK(d.hint == "did you mean 'out'?");

  d = error(kHead + "  - {op: relu, input: x, slope: 2}\n" + kMse);
  CHECK(d.hint == "relu takes no attributes");
}

TEST_CASE("missing required attribute") {
  Diagnostic d = error(kHead + "  - {op: linear, name: fc, input: x}\n" + kMse);
  CHECK_AT(d, 7, 10);
  CHECK(d.message == "linear layer 'fc' is missing its 'out' attribute");
  CHECK(contains(d.hint, "out: output features"));
}

TEST_CASE("attribute of the wrong type") {
  Diagnostic d = error(kHead + "  - {op: linear, input: x, out: 4, bias: 1}\n" + kMse);
  CHECK_AT(d, 7, 42);
  CHECK(d.message == "attribute 'bias' of linear must be true or false, got '1'");

  d = error(kHead + "  - {op: linear, input: x, out: [4]}\n" + kMse);
  CHECK_AT(d, 7, 33);
  CHECK(d.message == "attribute 'out' of linear must be an integer expression, got a list");

  d = error(kHead + "  - {op: dropout, input: x, p: lots}\n" + kMse);
  CHECK_AT(d, 7, 32);
  CHECK(contains(d.message, "attribute 'p' of dropout must be a number"));

  d = error(kHead + "  - {op: gelu, input: x, approximate: tan}\n" + kMse);
  CHECK_AT(d, 7, 39);
  CHECK(contains(d.message, "must be one of 'none' and 'tanh'"));
  CHECK(d.hint == "did you mean 'tanh'?");

  d = error(kHead + "  - {op: linear, input: x, out: 2.5}\n" + kMse);
  CHECK(d.message == "attribute 'out' of linear must be an integer, got 2.5");

  d = error(kHead + "  - {op: dropout, input: x, p: 1.5}\n" + kMse);
  CHECK_AT(d, 7, 32);
  CHECK(contains(d.message, "must be in [0, 1)"));
}

TEST_CASE("a dim that is not defined points at the name inside the expression") {
  Diagnostic d = error(kHead + "  - {op: linear, input: x, out: 4 * dd}\n" + kMse);
  CHECK_AT(d, 7, 37);
  CHECK(d.message == "'dd' is not a defined dim");
  CHECK(d.hint == "did you mean 'd'?");

  // Quoted scalars: the text starts one column after the quote.
  d = error(kHead + "  - {op: linear, input: x, out: \"4 * vocb\"}\n" + kMse);
  CHECK_AT(d, 7, 38);
  CHECK(d.hint == "did you mean 'vocab'?");

  // Text that is not written verbatim (an escape here) is reported at the scalar itself.
  d = error(kHead + "  - {op: linear, input: x, out: \"4 *\\t dd\"}\n" + kMse);
  CHECK_AT(d, 7, 33);
  CHECK(d.message == "'dd' is not a defined dim");

  // Dims are evaluated in order.
  d = error("model: t\ndims:\n  a: b * 2\n  b: 4\n");
  CHECK_AT(d, 3, 6);
  CHECK(contains(d.hint, "'b' is defined below, at line 4"));
}

TEST_CASE("expressions that do not evaluate") {
  Diagnostic d = error("model: t\ndims:\n  d_model: 256\n  heads: 3\n  d_head: d_model / heads\n");
  CHECK_AT(d, 5, 19);
  CHECK(d.message == "'d_model / heads' does not divide evenly (d_model=256, heads=3)");

  d = error("model: t\ndims:\n  a: 0\n  b: 8 / a\n");
  CHECK_AT(d, 4, 8);
  CHECK(contains(d.message, "division by zero"));

  d = error("model: t\ndims:\n  a: 4611686018427387904\n  b: a * 4\n");
  CHECK_AT(d, 4, 8);
  CHECK(contains(d.message, "overflows a 64-bit integer"));

  d = error("model: t\ndims:\n  a: (4 + 2\n");
  CHECK_AT(d, 3, 6);
  CHECK(contains(d.message, "never closed"));

  d = error("model: t\ndims:\n  a: 4 +\n");
  CHECK_AT(d, 3, 9);
  CHECK(contains(d.message, "incomplete expression"));

  d = error("model: t\ndims:\n  a: " + std::string(5000, '(') + "\n");
  CHECK(contains(d.message, "longer than"));
}

TEST_CASE("an input name that is not defined yet") {
  Diagnostic d = error(kHead +
                       "  - {op: linear, input: x, out: d, output: hidden}\n"
                       "  - {op: add, inputs: [x, hiden]}\n" +
                       kMse);
  CHECK_AT(d, 8, 27);
  CHECK(d.message == "'hiden' is not defined at this point");
  CHECK(d.hint == "did you mean 'hidden'?");

  d = error(kHead + "  - {op: relu, input: q}\n" + kMse);
  CHECK_AT(d, 7, 23);
  CHECK(contains(d.hint, "defined here: "));
  CHECK(contains(d.hint, "'x'"));

  // The first layer reads no previous layer.
  d = error(kHead + "  - {op: relu}\n" + kMse);
  CHECK_AT(d, 7, 10);
  CHECK(contains(d.message, "give it an 'input:'"));
  CHECK(contains(d.hint, "input: "));
}

TEST_CASE("shapes that do not fit name both shapes and the layer") {
  Diagnostic d = error(kHead +
                       "  - {op: linear, name: proj, input: x, out: 6}\n"
                       "  - {op: add, name: res, inputs: [x, _]}\n" +
                       kMse);
  CHECK_AT(d, 8, 10);
  CHECK(d.message == "layer 'res' (add): shapes f32[2, 4, 8] and f32[2, 4, 6] do not broadcast");

  d = error(kHead + "  - {op: attention, name: attn, input: x, heads: 3}\n" + kMse);
  CHECK_AT(d, 7, 50);
  CHECK(contains(d.message, "d_model 8 is not divisible by heads 3"));

  d = error(kHead + "  - {op: reshape, input: x, shape: [3, -1]}\n" + kMse);
  CHECK_AT(d, 7, 36);
  CHECK(contains(d.message, "cannot reshape f32[2, 4, 8] (64 elements)"));

  d = error(kHead + "  - {op: softmax, input: x, dim: 3}\n" + kMse);
  CHECK_AT(d, 7, 34);
  CHECK(contains(d.message, "dim 3 is out of range for its input f32[2, 4, 8]"));

  d = error(kHead + "  - {op: reshape, input: x, shape: [64]}\n  - {op: attention, heads: 2}\n" + kMse);
  CHECK_AT(d, 8, 10);
  CHECK(contains(d.message, "needs an input [batch, seq, d_model], but '_' is f32[64]"));

  d = error(kHead + "  - {op: embedding, input: x, num: vocab, dim: d}\n" + kMse);
  CHECK_AT(d, 7, 28);
  CHECK(contains(d.message, "needs integer indices (i64 or i32), but 'x' is f32[2, 4, 8]"));

  d = error(kHead + "  - {op: pos_embedding, input: x, length: seq - 1}\n" + kMse);
  CHECK_AT(d, 7, 43);
  CHECK(contains(d.message, "has length 3, shorter than the 4 positions"));
}

TEST_CASE("a repeat count that is not a positive integer") {
  Diagnostic d = error(kHead + "  - {repeat: seq - 4, input: x, layers: [{op: relu}]}\n" + kMse);
  CHECK_AT(d, 7, 14);
  CHECK(d.message == "the repeat count must be a positive integer, but 'seq - 4' is 0");

  d = error(kHead + "  - {repeat: -2, input: x, layers: [{op: relu}]}\n" + kMse);
  CHECK(d.message == "the repeat count must be a positive integer, but it is -2");

  d = error(kHead + "  - {repeat: 2.5, input: x, layers: [{op: relu}]}\n" + kMse);
  CHECK_AT(d, 7, 14);
  CHECK(d.message == "the repeat count must be an integer, got 2.5");

  d = error(kHead + "  - {repeat: many, input: x, layers: [{op: relu}]}\n" + kMse);
  CHECK(d.message == "'many' is not a defined dim");

  d = error(kHead + "  - {repeat: 2, input: x, layers: []}\n" + kMse);
  CHECK(contains(d.message, "non-empty list of layers"));
}

TEST_CASE("loss target of the wrong dtype or shape") {
  const std::string head =
      "model: t\n"
      "dims: {batch: 2, seq: 4, vocab: 10}\n"
      "inputs:\n"
      "  tokens: {shape: [batch, seq], dtype: i64}\n"
      "  float_targets: {shape: [batch, seq], dtype: f32}\n"
      "  short_targets: {shape: [batch, 3], dtype: i64}\n"
      "layers:\n"
      "  - {op: embedding, input: tokens, num: vocab, dim: vocab}\n";
  Diagnostic d = error(head + "loss: {op: cross_entropy, target: float_targets}\n");
  CHECK_AT(d, 9, 35);
  CHECK(d.message ==
        "cross_entropy needs integer class indices as target, but the target is 'float_targets' f32[2, 4]");
  CHECK(contains(d.hint, "dtype: i64"));

  d = error(head + "loss: {op: cross_entropy, target: short_targets}\n");
  CHECK_AT(d, 9, 35);
  CHECK(d.message ==
        "the target 'short_targets' i64[2, 3] does not fit the logits '_' f32[2, 4, 10]: it must have shape [2, 4]");

  d = error(kHead + "  - {op: relu, input: x}\nloss: {op: mse, target: z}\n");
  CHECK(d.message == "'z' is not defined at this point");

  d = error(kHead + "  - {op: relu, input: x}\nloss: {op: mes, target: y}\n");
  CHECK_AT(d, 8, 12);
  CHECK(d.hint == "did you mean 'mse'?");
}

TEST_CASE("duplicate parameter names point at the second layer and name the first's line") {
  Diagnostic d = error(kHead +
                       "  - {op: linear, name: fc, input: x, out: d}\n"
                       "  - {op: relu}\n"
                       "  - {op: linear, name: fc, out: d}\n" +
                       kMse);
  CHECK_AT(d, 9, 24);
  CHECK(d.message == "duplicate parameter 'fc.weight': the layer at line 7 already defines it");
}

TEST_CASE("a file that is not YAML") {
  Diagnostic d = error("model: t\nlayers: [unclosed\n");
  CHECK_AT(d, 2, 9);
  CHECK(d.message == "not valid YAML: this '[' is never closed");

  d = error("model: t\n  dims: 4\n bad: [\n");
  CHECK(d.line >= 1);
  CHECK(contains(d.message, "not valid YAML"));

  d = error("model: \"unterminated");
  CHECK_AT(d, 1, 21);
  CHECK(d.message == "not valid YAML: illegal EOF in scalar");

  d = error("\x01\x02\xff\xfe{{{{]]]]");
  CHECK(d.severity == Severity::Error);

  // Nesting deep enough to overflow a recursive parser.
  d = error(std::string(100000, '['));
  CHECK(contains(d.message, "levels deep"));

  d = error("");
  CHECK(d.message == "the spec is empty");

  d = error("model: a\n---\nmodel: b\n");
  CHECK(d.line == 2);
  CHECK(contains(d.message, "one YAML document"));

  d = error("model: a\nmodel: b\n");
  CHECK_AT(d, 2, 1);
  CHECK(d.message == "duplicate key 'model'");
}

TEST_CASE("a YAML document that is not a mapping") {
  Diagnostic d = error("- op: linear\n- op: relu\n");
  CHECK_AT(d, 1, 1);
  CHECK(d.message == "a spec is a YAML mapping with 'model', 'inputs', 'layers' and 'loss', but this document is a list");

  d = error("just some words\n");
  CHECK(contains(d.message, "this document is 'just some words'"));
}

TEST_CASE("unknown top-level keys") {
  Diagnostic d = error("model: t\nlayer: []\n");
  CHECK_AT(d, 2, 1);
  CHECK(d.message == "a spec has no key 'layer'");
  CHECK(d.hint == "did you mean 'layers'?");

  d = error("model: t\nwhatever: 1\n");
  CHECK(contains(d.hint, "the keys of a spec are 'model', 'dims'"));
}

TEST_CASE("structural mistakes in layers, inputs and the loss") {
  Diagnostic d = error(kHead + "  - relu\n" + kMse);
  CHECK_AT(d, 7, 5);
  CHECK(d.message == "a layer is a mapping such as {op: linear, out: 64}, got 'relu'");

  d = error(kHead + "  - {name: fc, input: x}\n" + kMse);
  CHECK_AT(d, 7, 5);
  CHECK(d.message == "this layer has no 'op'");

  d = error(kHead + "  - {op: relu, repeat: 2, input: x}\n" + kMse);
  CHECK_AT(d, 7, 16);
  CHECK(d.message == "a layer has either 'op' or 'repeat', not both");

  d = error(kHead + "  - {op: relu, input: x, output: _}\n" + kMse);
  CHECK_AT(d, 7, 34);
  CHECK(contains(d.message, "cannot be bound"));

  d = error(kHead + "  - {op: relu, inputs: [x]}\n" + kMse);
  CHECK_AT(d, 7, 16);
  CHECK(d.message == "relu takes one input; name it with 'input:'");

  d = error(kHead + "  - {op: add, input: x}\n" + kMse);
  CHECK_AT(d, 7, 15);
  CHECK(d.message == "add takes two inputs; name them with 'inputs: [a, b]'");

  d = error(kHead + "  - {op: mul, inputs: [x, y, x]}\n" + kMse);
  CHECK_AT(d, 7, 23);
  CHECK(d.message == "mul takes exactly two inputs, as in 'inputs: [a, b]'; got a list of 3");

  d = error(kHead + "  - {op: matmul}\n" + kMse);
  CHECK_AT(d, 7, 10);
  CHECK(contains(d.message, "needs its two inputs named"));

  d = error(kHead + "  - {op: linear, name: 2fast, input: x, out: 4}\n" + kMse);
  CHECK_AT(d, 7, 24);
  CHECK(contains(d.message, "a layer 'name' must be a name made of letters"));

  d = error("model: t\ninputs:\n  x: {shape: [2], dtype: f33}\n");
  CHECK_AT(d, 3, 26);
  CHECK(d.message == "unknown dtype 'f33' for input 'x'");
  CHECK(d.hint == "did you mean 'f32'?");

  d = error("model: t\ninputs:\n  x: {shap: [2]}\n");
  CHECK_AT(d, 3, 7);
  CHECK(d.message == "input 'x' has no key 'shap'");
  CHECK(d.hint == "did you mean 'shape'?");

  d = error("model: t\ndtype: i64\n");
  CHECK_AT(d, 2, 8);
  CHECK(contains(d.message, "the model dtype must be one of 'f32', 'f64', 'f16' and 'bf16'"));

  d = error("dims: {a: 1}\n");
  CHECK_AT(d, 1, 1);
  CHECK(d.message == "the spec has no 'model' name");

  d = error("model: my model\n");
  CHECK_AT(d, 1, 8);
  CHECK(contains(d.message, "the model name must be letters"));

  d = error(kHead + "  - {op: relu, input: x}\n");
  CHECK(d.message == "the spec has no 'loss'");

  d = error(kHead + "  - {op: relu, input: x}\nloss: {op: mse}\n");
  CHECK_AT(d, 8, 12);
  CHECK(d.message == "the loss has no 'target'");

  d = error(kHead + "  - {op: relu, input: x}\nloss: {op: mse, target: y, weight: 2}\n");
  CHECK_AT(d, 8, 28);
  CHECK(d.message == "the loss has no key 'weight'");

  d = error(kHead + "  - {op: relu, input: x}\nloss: {op: mse, target: x, input: y}\nextra: 1\n");
  CHECK_AT(d, 9, 1);
  CHECK(d.message == "a spec has no key 'extra'");
}

TEST_CASE("YAML alias bombs are stopped at the alias that explodes") {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    char prev = static_cast<char>(c - 1);
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", *" : "*") + prev;
    bomb += "]\n";
  }
  SpecOptions options;
  options.maxYamlNodes = 100000;
  Diagnostic d = error(bomb, options);
  CHECK(d.message == "YAML aliases expand to more than 100000 nodes");
  CHECK(d.line == 5);  // e: 111,111 nodes, the first to pass the limit

  d = error("a: &x [1, *x]\n");
  CHECK_AT(d, 1, 11);
  CHECK(contains(d.message, "cycle"));
}

TEST_CASE("oversized sources and graphs are refused") {
  SpecOptions options;
  options.maxSourceBytes = 100;
  Diagnostic d = error(kHead + "  - {op: relu, input: x}\n" + kMse, options);
  CHECK(d.line == 0);
  CHECK(contains(d.message, "more than the limit of 100"));

  options = {};
  options.maxGraphNodes = 1000;
  d = error(kHead + "  - {repeat: 1_000_000_000, input: x, layers: [{op: relu}]}\n" + kMse, options);
  CHECK_AT(d, 7, 14);
  CHECK(d.message ==
        "this repeat expands to more than the limit of 1000 layers (1000000000 iterations of 1 layers)");
  // Nested repeats multiply (and the product saturates instead of overflowing).
  d = error(kHead +
                "  - repeat: 1_000_000_000_000\n"
                "    input: x\n"
                "    layers: [{repeat: 1_000_000_000_000, layers: [{op: relu}]}]\n" +
                kMse,
            options);
  CHECK_AT(d, 7, 13);
  CHECK(contains(d.message, "this repeat expands to more than the limit of 1000 layers"));

  // An lstm is refused before it is unrolled.
  options.overrides = {{"seq", "100"}};
  d = error(kHead + "  - {op: lstm, input: x, hidden: d}\n" + kMse, options);
  CHECK_AT(d, 7, 10);
  CHECK(contains(d.message, "unrolls 100 time steps x 1 layers, more than the limit of 1000 IR nodes"));

  d = error(kHead + "  - {op: linear, input: x, out: 1_000_000_000_000_000}\n" + kMse);
  CHECK_AT(d, 7, 10);
  CHECK(contains(d.message, "tensor of shape [1000000000000000, 8] is too large"));
}

TEST_CASE("--set errors: unknown names and bad expressions") {
  SpecOptions options;
  options.overrides = {{"dd", "4"}};
  Diagnostic d = error(kHead + "  - {op: relu, input: x}\n" + kMse, options);
  CHECK(d.file == "--set");
  CHECK(d.line == 0);
  CHECK(d.message == "--set dd: the spec has no dim 'dd'");
  CHECK(d.hint == "did you mean 'd'?");

  options.overrides = {{"batch", "2 / 0"}};
  d = error(kHead + "  - {op: relu, input: x}\n" + kMse, options);
  CHECK(d.file == "--set");
  CHECK(contains(d.message, "division by zero"));

  options.overrides = {{"batch", "0"}};
  d = error(kHead + "  - {op: relu, input: x}\n" + kMse, options);
  CHECK_AT(d, 4, 15);
  CHECK(contains(d.message, "must be positive, but 'batch' is 0"));
}

TEST_CASE("warnings: results and inputs nothing uses") {
  std::string text = kHead +
                     "  - {op: linear, input: x, out: d, output: unused}\n"
                     "  - {op: relu, input: x}\n"
                     "loss: {op: mse, target: x}\n";
  SpecResult r = compileSpec(text, "w.yaml");
  REQUIRE(r.ok());
  REQUIRE(r.diagnostics.size() == 2);
  CHECK(r.diagnostics[0].severity == Severity::Warning);
  CHECK_AT(r.diagnostics[0], 7, 10);
  CHECK(r.diagnostics[0].message == "the output of layer 'linear_0' (linear) is never used");
  CHECK_AT(r.diagnostics[1], 5, 3);
  CHECK(r.diagnostics[1].message == "input 'y' is never used");
}

TEST_CASE("formatDiagnostic prints file:line:col, the line, a caret and the hint") {
  std::string text = kHead + "  - {op: lienar, input: x, out: 4}\n" + kMse;
  SpecResult r = compileSpec(text, "models/bad.yaml");
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(frontend::formatDiagnostic(r.diagnostics[0], text) ==
        "models/bad.yaml:7:10: error: unknown op 'lienar'\n"
        "    7 |   - {op: lienar, input: x, out: 4}\n"
        "      |          ^\n"
        "  hint: did you mean 'linear'?\n");

  Diagnostic noLocation{Severity::Error, "--set", 0, 0, "--set dd: the spec has no dim 'dd'", ""};
  CHECK(frontend::formatDiagnostic(noLocation, text) == "--set: error: --set dd: the spec has no dim 'dd'\n");
}

TEST_CASE("an unreadable file is a diagnostic") {
  SpecResult r = frontend::compileSpecFile("/nonexistent/spec.yaml");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(r.diagnostics[0].message == "cannot read the spec file");
}
