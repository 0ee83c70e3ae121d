// The composed attention kernels (runtime/kernels/attention_composite.h: what a device without a
// kernel of its own, and CUDA where its fused kernel does not fit, runs) against the host's
// tiled kernels: outputs, log-sum-exp and gradients, f64 within 1e-12 and f32 within 1e-5
// relative, over causal and not, cross-attention both ways, grouped-query heads, odd sizes, a
// strided q, dropout (the composite's mask drawn through the row-run positions a device's
// dropout kernel is given, here on the host's counter-based RNG), and blocks of 1, 7 and all
// query rows. The composite allocates no more than the workspace a CUDA plan declares for the
// node (ir::AttentionChunks), which for a long sequence is far below one [S, S_kv] matrix.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ir/attention_tiles.h"
#include "ir/kernel_target.h"
#include "ir/op_table.h"
#include "runtime/core/counter_rng.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"
#include "runtime/kernels/attention_composite.h"
#include "tests/runtime/attention_cases.h"

#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using runtime::AttentionCall;
using runtime::AttentionDropout;

namespace {

constexpr std::uint64_t kSeed = 5;
constexpr std::int64_t kStep = 2;
constexpr std::int64_t kRng = 9;

// The host's mask at the composite's positions, in place (as a device's dropout kernel runs):
// element e of the block draws stream position first + (e / run) * stride + e % run.
template <class T>
void dropInPlace(T* x, std::int64_t n, std::int64_t first, std::int64_t run, std::int64_t stride, double p) {
  const runtime::RngStream rng{kSeed, kStep, kRng};
  const float threshold = runtime::dropoutThreshold(p);
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  std::vector<float> u(static_cast<size_t>(run));
  for (std::int64_t r0 = 0; r0 < n; r0 += run) {
    runtime::uniformFloats(rng, first + (r0 / run) * stride, run, u.data());
    for (std::int64_t e = 0; e < run; ++e) x[r0 + e] = u[static_cast<size_t>(e)] >= threshold ? x[r0 + e] * scale : T(0);
  }
}

AttentionDropout hostDropout(double p) {
  return [p](at::Tensor& block, std::int64_t first, std::int64_t run, std::int64_t stride) {
    REQUIRE(block.is_contiguous());
    if (block.scalar_type() == at::kDouble)
      dropInPlace(block.data_ptr<double>(), block.numel(), first, run, stride, p);
    else
      dropInPlace(block.data_ptr<float>(), block.numel(), first, run, stride, p);
  };
}

double relErr(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         std::max(b.to(at::kDouble).abs().max().item<double>(), 1e-300);
}

ir::TensorType typeOf(const at::Tensor& t) {
  return {t.scalar_type() == at::kDouble ? ir::DType::f64 : ir::DType::f32,
          ir::Shape(t.sizes().begin(), t.sizes().end())};
}

using Case = testing::AttentionCase;
using testing::withRows;

struct Operands {
  at::Tensor q, k, v, dout;
  ir::AttrMap attrs;
  AttentionCall call;
  AttentionDropout drop;
};

Operands operandsOf(const Case& c, at::ScalarType dtype) {
  at::manual_seed(3);
  const auto opts = at::TensorOptions().dtype(dtype);
  Operands o;
  o.q = at::randn(withRows(c.qLead, c.S, c.Dh), opts);
  if (c.stridedQ) o.q = o.q.transpose(-2, -3).contiguous().transpose(-2, -3);
  o.k = at::randn(withRows(c.kvLead, c.Skv, c.Dh), opts);
  o.v = at::randn(withRows(c.kvLead, c.Skv, c.Dv), opts);
  o.dout = at::randn(withRows(c.qLead, c.S, c.Dv), opts);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.Dh));
  o.attrs = {{"causal", c.causal}, {"scale", scale}};
  o.call.causal = c.causal;
  o.call.scale = scale;
  if (c.p > 0) {
    o.attrs["p"] = c.p;
    o.attrs["rng"] = kRng;
    o.call.p = c.p;
    o.drop = hostDropout(c.p);
  }
  return o;
}

}  // namespace

TEST_CASE("composed attention: equal to the host's tiled kernels, dropout drawn at the unfused op's positions") {
  const std::vector<Case> cases{
      {"self, causal", {2, 3}, {2, 3}, 29, 29, 8, 8, true},
      {"not causal, cross S < S_kv", {1, 2}, {1, 2}, 13, 70, 16, 16, false},
      {"causal cross, S < S_kv, odd sizes", {2, 2}, {2, 2}, 19, 45, 5, 7, true},
      {"cross, S > S_kv", {3, 2}, {3, 2}, 40, 11, 4, 9, false},
      {"grouped-query heads (3 per key head)", {2, 2, 3}, {2, 2, 1}, 23, 23, 8, 8, true},
      {"dropout 0.3, causal, grouped-query", {2, 2, 2}, {2, 2, 1}, 31, 31, 8, 8, true, 0.3},
      {"dropout 0.5, cross", {1, 3}, {1, 3}, 17, 40, 8, 4, false, 0.5},
      {"strided q, causal", {2, 3}, {2, 3}, 21, 21, 8, 8, true, 0.0, true},
  };
  for (at::ScalarType dtype : {at::kDouble, at::kFloat})
    for (const Case& c : cases)
      for (std::int64_t rows : {1, 7, 0}) {
        INFO(c.name << ", " << (dtype == at::kDouble ? "f64" : "f32") << ", blocks of "
                    << (rows ? std::to_string(rows) : "the rule's") << " rows");
        Operands o = operandsOf(c, dtype);
        o.call.blockRows = rows;
        if (c.p > 0) o.call.drop = &o.drop;
        Expected<std::vector<at::Tensor>> host =
            runtime::callOp("attention", std::vector<at::Tensor>{o.q, o.k, o.v}, o.attrs, {kSeed, kStep});
        REQUIRE(host.ok());
        Expected<std::vector<at::Tensor>> hostGrads = runtime::callOp(
            "attention_backward", std::vector<at::Tensor>{o.dout, o.q, o.k, o.v, (*host)[0], (*host)[1]}, o.attrs,
            {kSeed, kStep});
        REQUIRE(hostGrads.ok());

        at::Tensor out = at::empty_like((*host)[0]), lse = at::empty_like((*host)[1]);
        runtime::composedAttention(o.q, o.k, o.v, out, lse, o.call);
        at::Tensor dq = at::empty_like(o.q, at::MemoryFormat::Contiguous), dk = at::empty_like(o.k),
                   dv = at::empty_like(o.v);
        runtime::composedAttentionBackward(o.dout, o.q, o.k, o.v, (*host)[0], (*host)[1], dq, dk, dv, o.call);
        const double tol = dtype == at::kDouble ? 1e-12 : 1e-5;
        CHECK(relErr(out, (*host)[0]) <= tol);
        CHECK(relErr(lse, (*host)[1]) <= tol);
        CHECK(relErr(dq, (*hostGrads)[0]) <= tol);
        CHECK(relErr(dk, (*hostGrads)[1]) <= tol);
        CHECK(relErr(dv, (*hostGrads)[2]) <= tol);
      }
}

TEST_CASE("composed attention: dropout without a device mask is refused, not run unmasked") {
  Operands o = operandsOf({"dropout", {1, 2}, {1, 2}, 8, 8, 4, 4, true, 0.2}, at::kFloat);
  at::Tensor out = at::empty({1, 2, 8, 4}), lse = at::empty({1, 2, 8});
  CHECK_THROWS_WITH_AS(runtime::composedAttention(o.q, o.k, o.v, out, lse, o.call),
                       doctest::Contains("draws no dropout mask"), c10::Error);
}

TEST_CASE("composed attention: allocates within a CUDA plan's declared workspace, far below one [S, S_kv] matrix") {
  // 4 heads of 3,000 queries and keys in f32: a [4, 3000, 3000] matrix is 144 MB; the blocks
  // take 699 rows (about 32 MiB of scores) at a time.
  struct Size {
    std::vector<std::int64_t> qLead, kvLead;
    std::int64_t S;
    double p;
  };
  for (const Size& z : {Size{{1, 4}, {1, 4}, 3000, 0.0}, Size{{1, 4}, {1, 1}, 3000, 0.1}}) {
    INFO("shared heads " << (z.kvLead != z.qLead) << ", dropout " << z.p);
    Operands o = operandsOf({"long", z.qLead, z.kvLead, z.S, z.S, 16, 16, true, z.p}, at::kFloat);
    if (z.p > 0) o.call.drop = &o.drop;
    std::vector<ir::TensorType> in{typeOf(o.q), typeOf(o.k), typeOf(o.v)};
    const std::vector<ir::TensorType> fwdOut{typeOf(o.dout), {ir::DType::f32, {1, 4, z.S}}};
    const ir::KernelSetting cuda{1, ir::findKernelTarget("cuda")};
    // The composed kernels' bound: what a CUDA plan declares for nodes they run (here the one
    // with dropout and shared heads; CUDA's fused kernel takes the other).
    const ir::AttentionChunks chunks = runtime::attentionChunksOf(o.q, o.k, o.v, true, z.p > 0);
    const std::int64_t declaredFwd = chunks.forwardBytes(), declaredBwd = chunks.backwardBytes();
    std::vector<ir::TensorType> bwdIn{typeOf(o.dout), in[0], in[1], in[2], fwdOut[0], fwdOut[1]};
    const bool composedOnCuda = !chunks.cudaFused(true);
    CHECK(composedOnCuda == (z.p > 0));
    if (composedOnCuda) {
      CHECK(ir::opWorkspaceBytes(*ir::findOp("attention"), in, o.attrs, fwdOut, cuda) == declaredFwd);
      CHECK(ir::opWorkspaceBytes(*ir::findOp("attention_backward"), bwdIn, o.attrs, in, cuda) == declaredBwd);
    }
    const std::int64_t matrix = 4 * z.S * z.S * 4;
    CHECK(declaredFwd < matrix / 2);
    CHECK(declaredBwd < matrix);
    // The host plan's workspace is the tile slots, not the composite's.
    CHECK(ir::opWorkspaceBytes(*ir::findOp("attention"), in, o.attrs, fwdOut, 1) != declaredFwd);

    runtime::MemoryTracker::install();
    at::Tensor out = at::empty({1, 4, z.S, 16}), lse = at::empty({1, 4, z.S});
    std::int64_t before = runtime::MemoryTracker::outsideBytes();
    runtime::MemoryTracker::resetOutsidePeak();
    runtime::composedAttention(o.q, o.k, o.v, out, lse, o.call);
    const std::int64_t usedFwd = runtime::MemoryTracker::outsidePeakBytes() - before;
    at::Tensor dq = at::empty_like(o.q), dk = at::empty_like(o.k), dv = at::empty_like(o.v);
    before = runtime::MemoryTracker::outsideBytes();
    runtime::MemoryTracker::resetOutsidePeak();
    runtime::composedAttentionBackward(o.dout, o.q, o.k, o.v, out, lse, dq, dk, dv, o.call);
    const std::int64_t usedBwd = runtime::MemoryTracker::outsidePeakBytes() - before;
    MESSAGE("forward " << usedFwd << " B of " << declaredFwd << " declared; backward " << usedBwd << " B of "
                       << declaredBwd << "; one [S, S_kv] matrix " << matrix << " B");
    CHECK(usedFwd > 0);
    CHECK(usedFwd <= declaredFwd);
    CHECK(usedBwd <= declaredBwd);
    // The blocks hold one bounded slice of the scores: more than one block ran.
    CHECK(chunks.rows() == 699);
  }
}
