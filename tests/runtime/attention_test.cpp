// The fused attention kernels (runtime/kernels/kernels_attention.cpp) against LibTorch autograd on the
// decomposition they replace (matmul, scale, causal mask, softmax, dropout, matmul): outputs,
// log-sum-exp and the three gradients, f64 within 1e-12 and f32 within 1e-5 relative, over
// causal and not, grouped-query heads (shared key heads summed), cross-attention (S != S_kv),
// several query and key tiles, odd head sizes, a strided (transposed) q, dropout with the unfused
// op's mask, at 1 and 2 threads. Each kernel allocates exactly its results and its declared
// workspace.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ir/op_table.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"
#include "tests/runtime/attention_cases.h"

#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;

namespace {

constexpr std::uint64_t kSeed = 11;
constexpr std::int64_t kStep = 3;
constexpr std::int64_t kRng = 4;

ir::TensorType typeOf(const at::Tensor& t) {
  return {t.scalar_type() == at::kDouble ? ir::DType::f64 : ir::DType::f32,
          ir::Shape(t.sizes().begin(), t.sizes().end())};
}

// Runs the op; checks that it allocated exactly its results and its declared workspace.
std::vector<at::Tensor> run(std::string_view op, const std::vector<at::Tensor>& operands, const ir::AttrMap& attrs) {
  runtime::MemoryTracker::install();
  const std::int64_t before = runtime::MemoryTracker::outsideBytes();
  runtime::MemoryTracker::resetOutsidePeak();
  Expected<std::vector<at::Tensor>> r = runtime::callOp(op, operands, attrs, {kSeed, kStep});
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  const std::int64_t allocated = runtime::MemoryTracker::outsidePeakBytes() - before;
  std::vector<ir::TensorType> in, out;
  std::int64_t resultBytes = 0;
  for (const at::Tensor& t : operands) in.push_back(typeOf(t));
  for (const at::Tensor& t : *r) {
    out.push_back(typeOf(t));
    resultBytes += static_cast<std::int64_t>(t.nbytes());
  }
  const std::int64_t declared = ir::opWorkspaceBytes(*ir::findOp(op), in, attrs, out, at::get_num_threads());
  CHECK(declared > 0);
  CHECK(allocated == resultBytes + declared);
  return *r;
}

double relErr(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         std::max(b.to(at::kDouble).abs().max().item<double>(), 1e-300);
}

using Case = testing::AttentionCase;

}  // namespace

TEST_CASE("fused attention: forward and backward equal autograd on the decomposition, allocation == declared") {
  const std::vector<Case> cases{
      {"self, causal, one tile", {2, 3}, {2, 3}, 9, 9, 8, 8, true},
      {"self, not causal, several query and key tiles", {1, 2}, {1, 2}, 130, 300, 16, 16, false},
      {"causal, several tiles, odd sizes", {2, 1}, {2, 1}, 300, 300, 5, 7, true},
      {"causal cross (S < S_kv: top-left aligned)", {2, 2}, {2, 2}, 37, 270, 6, 6, true},
      {"grouped-query heads (k, v shared by 3 query heads)", {2, 2, 3}, {2, 2, 1}, 70, 70, 8, 8, true},
      {"cross-attention, S > S_kv", {3, 2}, {3, 2}, 65, 17, 4, 9, false},
      {"dropout 0.3, causal, grouped-query", {2, 2, 2}, {2, 2, 1}, 66, 66, 8, 8, true, 0.3},
      {"dropout 0.5, cross, several key tiles", {1, 3}, {1, 3}, 20, 513, 8, 4, false, 0.5},
      {"strided q (a transposed view), causal", {2, 3}, {2, 3}, 33, 33, 8, 8, true, 0.0, true},
  };
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (at::ScalarType dtype : {at::kDouble, at::kFloat})
      for (const Case& c : cases) {
        INFO(c.name << ", " << (dtype == at::kDouble ? "f64" : "f32") << ", " << threads << " thread(s)");
        at::manual_seed(7);
        const auto opts = at::TensorOptions().dtype(dtype);
        at::Tensor q = at::randn(testing::withRows(c.qLead, c.S, c.Dh), opts);
        if (c.stridedQ) q = q.transpose(-2, -3).contiguous().transpose(-2, -3);  // same values, strided rows
        const at::Tensor k = at::randn(testing::withRows(c.kvLead, c.Skv, c.Dh), opts);
        const at::Tensor v = at::randn(testing::withRows(c.kvLead, c.Skv, c.Dv), opts);
        const at::Tensor dout = at::randn(testing::withRows(c.qLead, c.S, c.Dv), opts);
        const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dh));
        ir::AttrMap attrs{{"causal", c.causal}, {"scale", scale}};
        if (c.p > 0) {
          attrs["p"] = c.p;
          attrs["rng"] = kRng;
        }

        // The decomposition, with the dropout op's own mask on the probabilities.
        at::Tensor qr = q.detach().clone().requires_grad_(true), kr = k.clone().requires_grad_(true),
                   vr = v.clone().requires_grad_(true);
        at::Tensor scores = at::matmul(qr, kr.transpose(-2, -1)) * scale;
        if (c.causal)
          scores = scores.masked_fill(at::ones({c.S, c.Skv}, at::TensorOptions().dtype(at::kBool)).triu(1),
                                      -std::numeric_limits<double>::infinity());
        at::Tensor probs = at::softmax(scores, -1);
        if (c.p > 0) {
          Expected<std::vector<at::Tensor>> mask = runtime::callOp(
              "dropout", std::vector<at::Tensor>{at::ones(probs.sizes(), opts)}, {{"p", c.p}, {"rng", kRng}},
              {kSeed, kStep});
          REQUIRE(mask.ok());
          probs = probs * (*mask)[0];
        }
        at::Tensor expected = at::matmul(probs, vr);
        expected.backward(dout);
        const at::Tensor expectedLse = at::logsumexp(scores.detach(), {-1});

        const std::vector<at::Tensor> fwd = run("attention", {q, k, v}, attrs);
        const std::vector<at::Tensor> bwd = run("attention_backward", {dout, q, k, v, fwd[0], fwd[1]}, attrs);
        const double tol = dtype == at::kDouble ? 1e-12 : 1e-5;
        CHECK(relErr(fwd[0], expected.detach()) <= tol);
        CHECK(relErr(fwd[1], expectedLse) <= tol);
        CHECK(relErr(bwd[0], qr.grad()) <= tol);
        CHECK(relErr(bwd[1], kr.grad()) <= tol);
        CHECK(relErr(bwd[2], vr.grad()) <= tol);
        MESSAGE(c.name << " (" << (dtype == at::kDouble ? "f64" : "f32") << ", " << threads
                       << "t): out " << relErr(fwd[0], expected.detach()) << ", dq " << relErr(bwd[0], qr.grad())
                       << ", dk " << relErr(bwd[1], kr.grad()) << ", dv " << relErr(bwd[2], vr.grad()));
      }
  }
  at::set_num_threads(1);
}

TEST_CASE("fused attention: the declared workspace is one tile slot per thread, independent of the batch") {
  auto bytes = [](std::int64_t batch, std::int64_t T, int threads) {
    const ir::TensorType q{ir::DType::f32, {batch, 4, T, 32}};
    const std::vector<ir::TensorType> in{q, q, q};
    const std::vector<ir::TensorType> out{q, {ir::DType::f32, {batch, 4, T}}};
    return ir::opWorkspaceBytes(*ir::findOp("attention"), in, {{"causal", true}, {"scale", 0.125}}, out, threads);
  };
  CHECK(bytes(1, 1024, 1) == bytes(64, 1024, 1));
  CHECK(bytes(8, 1024, 2) == 2 * bytes(8, 1024, 1));
  // At T = 4096 one slot is a 64 x 256 tile of scores and its operands: far below one head's
  // 4096 x 4096 scores (64 MiB in f32).
  CHECK(bytes(8, 4096, 1) < 256 * 1024);
}
