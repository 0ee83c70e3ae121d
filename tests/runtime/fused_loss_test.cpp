// The fused LM-head loss (linear_cross_entropy, passes/fuse_loss.h) computes what the unfused
// linear + cross_entropy computes:
//  1. The op against LibTorch autograd (F::cross_entropy(F::linear(x, w, b), target)): the loss
//     and the gradients of x, w and b, with and without a bias, i64 and i32 targets, chunk counts
//     that divide the rows, that do not, and that exceed them, and an upstream gradient other
//     than 1 (the loss scaled, as on a data-parallel rank). Tolerance: max|ours - torch| <=
//     tol * max|torch|, tol = 1e-12 in f64 and 1e-5 in f32.
//  2. Whole models, fused against unfused (the same weights, inputs and dropout masks): gpt-mini
//     and lm-seed at reduced sizes, in f64 (tolerance 1e-6 relative) and f32 (1e-5), for several
//     chunk counts: the loss and every parameter gradient.
//  3. Remat on a fused step is bit-identical to the fused step alone.
// The measured relative errors are printed.
#include <torch/torch.h>

#include <string>

#include "frontend/spec.h"
#include "ir/parser.h"
#include "passes/autodiff.h"
#include "passes/dce.h"
#include "passes/fuse_loss.h"
#include "passes/memory/liveness.h"
#include "passes/pass_manager.h"
#include "passes/remat.h"
#include "runtime/exec/executor.h"
#include "runtime/train/init.h"
#include "runtime/train/synthetic_inputs.h"
#include "tests/bundled_model.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc;
namespace F = torch::nn::functional;

namespace {

constexpr std::uint64_t kSeed = 11;
constexpr std::int64_t kStep = 4;

double relDiff(const at::Tensor& ours, const at::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  const double diff = (ours.to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

void differentiate(ir::Graph& g) {
  passes::PassManager pm;
  pm.add<passes::Autodiff>().add<passes::DeadCodeElimination>();
  Expected<bool> ran = pm.run(g);
  REQUIRE_MESSAGE(ran.ok(), (ran.ok() ? "" : ran.error().message));
}

runtime::TensorMap execute(const ir::Graph& g, const runtime::TensorMap& state, const runtime::TensorMap& inputs) {
  runtime::TensorMap copy;
  for (const auto& [name, t] : state) copy.emplace(name, t.clone());
  Expected<runtime::Executor> exec = runtime::Executor::create(g);
  REQUIRE_MESSAGE(exec.ok(), (exec.ok() ? "" : exec.error().message));
  Expected<runtime::TensorMap> out = exec->run(inputs, copy, {kSeed, kStep});
  REQUIRE_MESSAGE(out.ok(), (out.ok() ? "" : out.error().message));
  return std::move(*out);
}

struct OpCase {
  std::string dtype;   // f32 or f64
  std::string target;  // i64 or i32
  bool bias;
  int chunks;
  double scale;  // the loss is the fused op's loss times this
};

std::string opGraphText(const OpCase& c) {
  const std::string& t = c.dtype;
  std::string text = "graph fused\n  input %y : " + c.target + "[3, 5]\n  param %x : " + t + "[3, 5, 8]\n  param %w : " + t +
                     "[11, 8]\n";
  if (c.bias) text += "  param %b : " + t + "[11]\n";
  text += "  %0, %1, %2" + std::string(c.bias ? ", %3" : "") + " = linear_cross_entropy(%x, %w, %y" +
          std::string(c.bias ? ", %b" : "") + ") {chunks = " + std::to_string(c.chunks) + "} : " + t + "[], " + t +
          "[3, 5, 8], " + t + "[11, 8]" + std::string(c.bias ? ", " + t + "[11]" : "") + " fwd\n";
  if (c.scale != 1.0) {
    text += "  %10 = scale(%0) {factor = " + std::to_string(c.scale) + "} : " + t + "[] fwd\n";
    text += "  output loss = %10\n";
  } else {
    text += "  output loss = %0\n";
  }
  return text;
}

}  // namespace

TEST_CASE("linear_cross_entropy: loss, lse and gradients vs LibTorch autograd") {
  for (const std::string dtype : {"f32", "f64"})
    for (const std::string target : {"i64", "i32"})
      for (bool bias : {false, true})
        for (int chunks : {1, 2, 4, 15, 40})
          for (double scale : {1.0, 0.25}) {
          const OpCase c{dtype, target, bias, chunks, scale};
          CAPTURE(opGraphText(c));
          Expected<ir::Graph> parsed = ir::parseGraph(opGraphText(c), "fused");
          REQUIRE_MESSAGE(parsed.ok(), (parsed.ok() ? "" : parsed.error().message));
          ir::Graph g = std::move(*parsed);
          differentiate(g);

          const at::ScalarType type = dtype == "f64" ? at::kDouble : at::kFloat;
          torch::manual_seed(3);
          runtime::TensorMap state;
          for (const auto& p : g.params()) state.emplace(p->name(), torch::randn(p->type().shape, type) * 2);
          runtime::TensorMap inputs{{"y", runtime::syntheticInput(*g.inputs()[0], kSeed, kStep)}};
          runtime::TensorMap out = execute(g, state, inputs);

          torch::Tensor x = state.at("x").clone().requires_grad_(true);
          torch::Tensor w = state.at("w").clone().requires_grad_(true);
          torch::Tensor b = bias ? state.at("b").clone().requires_grad_(true) : torch::Tensor();
          torch::Tensor logits = F::linear(x.reshape({15, 8}), w, b);
          torch::Tensor y = inputs.at("y").reshape({15}).to(at::kLong);
          torch::Tensor loss = F::cross_entropy(logits, y) * scale;
          loss.backward();
          const double tol = dtype == "f64" ? 1e-12 : 1e-5;
          double worst = relDiff(out.at("loss"), loss.detach());
          CHECK(worst <= tol);
          for (const auto& [name, ref] : std::vector<std::pair<std::string, torch::Tensor>>{
                   {"x", x.grad()}, {"w", w.grad()}, {"b", bias ? b.grad() : torch::Tensor()}}) {
            if (!ref.defined()) continue;
            CAPTURE(name);
            const at::Tensor& ours = out.at("grad." + name);
            CHECK(static_cast<bool>(ours.scalar_type() == type));
            const double rel = relDiff(ours, ref);
            CHECK(rel <= tol);
            worst = std::max(worst, rel);
          }
          MESSAGE(dtype << " target " << target << std::string(bias ? " bias" : "") << " chunks " << chunks
                        << " scale " << scale << ": worst rel err " << worst);
        }
}

namespace {

ir::Graph fusedJoint(const ir::Graph& forward, int chunks) {
  ir::Graph g = passes::remat::cloneGraph(forward);
  if (chunks > 0) {
    Expected<int> n = passes::fuseLinearCrossEntropy(g, chunks);
    REQUIRE_MESSAGE(n.ok(), (n.ok() ? "" : n.error().message));
    CHECK(*n == 1);
  }
  differentiate(g);
  return g;
}

runtime::TensorMap inputsOf(const ir::Graph& g) {
  runtime::TensorMap inputs;
  for (const auto& v : g.inputs()) inputs.emplace(v->name(), runtime::syntheticInput(*v, kSeed, kStep));
  return inputs;
}

struct ModelCase {
  std::string model;
  testing::DimOverrides dims;
};

std::vector<ModelCase> modelCases() {
  return {
      {"gpt-mini", {{"batch", "3"}, {"seq", "10"}, {"vocab", "97"}, {"d_model", "16"}, {"heads", "2"}, {"layers", "2"}}},
      {"lm-seed", {{"batch", "2"}, {"seq", "9"}, {"vocab", "131"}, {"d_model", "12"}, {"heads", "2"}, {"layers", "2"}}},
  };
}

}  // namespace

TEST_CASE("fused vs unfused loss: the loss and every gradient on gpt-mini and lm-seed, f64 and f32") {
  for (const ModelCase& m : modelCases())
    for (const std::string dtype : {"f64", "f32"}) {
      CAPTURE(m.model);
      CAPTURE(dtype);
      const ir::Graph forward = testing::compileBundledModelAs(m.model, dtype, m.dims);
      const ir::Graph unfused = fusedJoint(forward, 0);
      Expected<runtime::TensorMap> init = runtime::initParameters(unfused, kSeed);
      REQUIRE(init.ok());
      const runtime::TensorMap inputs = inputsOf(unfused);
      const runtime::TensorMap reference = execute(unfused, *init, inputs);
      const double tol = dtype == "f64" ? 1e-6 : 1e-5;
      for (int chunks : {1, 4, 7, 1000}) {
        CAPTURE(chunks);
        const ir::Graph fused = fusedJoint(forward, chunks);
        const runtime::TensorMap out = execute(fused, *init, inputs);
        double worst = 0;
        for (const auto& [name, ref] : reference) {
          if (name != "loss" && name.rfind("grad.", 0) != 0) continue;
          CAPTURE(name);
          REQUIRE(out.count(name));
          const double rel = relDiff(out.at(name), ref);
          CHECK(rel <= tol);
          worst = std::max(worst, rel);
        }
        MESSAGE(m.model << " " << dtype << " chunks " << chunks << ": worst rel err of loss and gradients " << worst);
      }
    }
}

TEST_CASE("remat on a fused step is bit-identical to the fused step alone") {
  for (const ModelCase& m : modelCases()) {
    CAPTURE(m.model);
    const ir::Graph forward = testing::compileBundledModelAs(m.model, "f32", m.dims);
    const ir::Graph fused = fusedJoint(forward, 3);
    Expected<runtime::TensorMap> init = runtime::initParameters(fused, kSeed);
    REQUIRE(init.ok());
    const runtime::TensorMap inputs = inputsOf(fused);
    const runtime::TensorMap reference = execute(fused, *init, inputs);
    for (passes::RematStrategy s :
         {passes::RematStrategy::Sqrt, passes::RematStrategy::MemoryPoor, passes::RematStrategy::Selective}) {
      CAPTURE(passes::rematStrategyName(s));
      ir::Graph g = passes::remat::cloneGraph(fused);
      passes::RematPass remat(s);
      REQUIRE(remat.run(g).ok());
      CHECK(remat.report().recomputeNodes > 0);
      CHECK(passes::lossChunksOf(g) == 3);
      const runtime::TensorMap out = execute(g, *init, inputs);
      for (const auto& [name, ref] : reference) {
        CAPTURE(name);
        CHECK(at::equal(out.at(name), ref));
      }
    }
  }
}
