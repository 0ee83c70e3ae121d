// The op table's workspace and FLOP rules: what the planner counts beside a kernel's results,
// as a function of the plan's kernel setting (intra-op threads, target device) -- per-thread
// partial sums, fused attention's tiles or CUDA's kernels, convolution's im2col or oneDNN's
// scratchpad, the fused loss's chunks.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ir/attention_tiles.h"
#include "ir/graph.h"
#include "ir/kernel_target.h"
#include "ir/op_table.h"
#include "ir/verifier.h"
#include "onednn/conv.h"
#include "tests/ir/op_cases.h"

using namespace gradc;
using namespace gradc::ir;

using namespace gradc::ir::op_cases;

TEST_CASE("layer_norm_backward's workspace is per intra-op thread: the graph's kernel_threads, a plan parameter") {
  const OpInfo* op = findOp("layer_norm_backward");
  REQUIRE(op);
  const std::vector<TensorType> in{f32({4, 8}), f32({4, 8}), f32({4, 1}), f32({4, 1}), f32({8}), f32({8})};
  const std::vector<TensorType> out{f32({4, 8}), f32({8}), f32({8})};
  // ATen's per-thread partial weight and bias gradient rows: 2 x threads x D floats.
  CHECK(opWorkspaceBytes(*op, in, {}, out, 1) == 2 * 1 * 8 * 4);
  CHECK(opWorkspaceBytes(*op, in, {}, out, 6) == 2 * 6 * 8 * 4);
  CHECK(opWorkspaceBytes(*op, in, {}, out, 0) == 2 * 1 * 8 * 4);  // no thread count below one

  Graph g;
  CHECK(g.kernelThreads() == 1);
  g.setKernelThreads(6);
  CHECK(g.kernelThreads() == 6);
  CHECK(getInt(g.attrs(), "kernel_threads") == 6);
  g.setKernelThreads(0);  // stated, so an artifact's graph always records its count
  CHECK(g.kernelThreads() == 1);
  CHECK(getInt(g.attrs(), "kernel_threads") == 1);
}

TEST_CASE("attention's workspace follows the plan's kernel target: tile slots on the host, CUDA's kernels there") {
  const OpInfo* fwd = findOp("attention");
  const OpInfo* bwd = findOp("attention_backward");
  REQUIRE((fwd && bwd));
  auto f64 = [](Shape s) { return TensorType{DType::f64, std::move(s)}; };
  const AttrMap causal{{"causal", true}, {"scale", 0.25}};
  const KernelTarget* cudaTarget = findKernelTarget("cuda");
  const KernelTarget* hostTarget = findKernelTarget("cpu");
  REQUIRE((cudaTarget && hostTarget));
  const KernelSetting cuda{1, cudaTarget};
  // [2, 4, 64, 16] f32: CUDA's fused kernel runs it. Forward: its output (32 KiB) and its
  // log-sum-exp rows padded to 32 in f32 (2 KiB), and two RNG scalars, each a 512-byte grain.
  const std::vector<TensorType> q{f32({2, 4, 64, 16}), f32({2, 4, 64, 16}), f32({2, 4, 64, 16})};
  const std::vector<TensorType> out{f32({2, 4, 64, 16}), f32({2, 4, 64})};
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, cuda) == 32768 + 2048 + 1024);
  // Backward: the padded log-sum-exp and the row sums (2 x 2 KiB), dq, dk, dv, an f32 dq
  // accumulator and copies of dout and out (6 x 32 KiB).
  const std::vector<TensorType> bq{out[0], q[0], q[1], q[2], out[0], out[1]};
  CHECK(opWorkspaceBytes(*bwd, bq, causal, q, cuda) == 4096 + 6 * 32768);
  // The host's: one tile slot per thread, whatever the target of other plans.
  const std::int64_t slot = AttentionTiling::of(64, 64, 16, 16, false).forwardSlot() * 4;
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, 2) == 2 * slot);
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, KernelSetting{2, hostTarget}) == 2 * slot);
  // The portable kernels' (the op table's rule): the composed blocks, as on CUDA where its fused
  // kernel does not run.
  const KernelSetting portable{1, &portableKernelTarget()};
  const std::vector<TensorType> gqaQ{f32({2, 4, 64, 16}), f32({2, 1, 64, 16}), f32({2, 1, 64, 16})};
  CHECK(opWorkspaceBytes(*fwd, gqaQ, causal, out, portable) == opWorkspaceBytes(*fwd, gqaQ, causal, out, cuda));
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, portable) != opWorkspaceBytes(*fwd, q, causal, out, cuda));

  // f64 is composed of ATen calls a block at a time (all 64 rows here): copies of q, k, v
  // (3 x 64 KiB), the scores [8, 64, 64] (256 KiB), the causal mask (4 KiB), three row
  // statistics (3 x 4 KiB), a copy of q's block and the block's output (2 x 64 KiB).
  const std::vector<TensorType> q64{f64({2, 4, 64, 16}), f64({2, 4, 64, 16}), f64({2, 4, 64, 16})};
  const std::vector<TensorType> out64{f64({2, 4, 64, 16}), f64({2, 4, 64})};
  CHECK(opWorkspaceBytes(*fwd, q64, causal, out64, cuda) == 3 * 65536 + 262144 + 4096 + 3 * 4096 + 2 * 65536);
  // So is dropout (gradc's mask), and shared key/value heads.
  AttrMap dropout = causal;
  dropout["p"] = 0.1;
  dropout["rng"] = std::int64_t{3};
  CHECK(opWorkspaceBytes(*fwd, q, dropout, out, cuda) > opWorkspaceBytes(*fwd, q, causal, out, cuda));
  const std::vector<TensorType> gqa{f32({2, 4, 64, 16}), f32({2, 1, 64, 16}), f32({2, 1, 64, 16})};
  CHECK(opWorkspaceBytes(*fwd, gqa, causal, out, cuda) > opWorkspaceBytes(*fwd, q, causal, out, cuda));

  // A long sequence: the composed kernels' blocks hold at most 32 MiB of scores, never the whole
  // [8, 16384, 16384] (8 GiB in f32).
  const std::vector<TensorType> longQ{f32({2, 4, 16384, 16}), f32({2, 1, 16384, 16}), f32({2, 1, 16384, 16})};
  const std::vector<TensorType> longOut{f32({2, 4, 16384, 16}), f32({2, 4, 16384})};
  const std::int64_t composed = opWorkspaceBytes(*fwd, longQ, causal, longOut, cuda);
  CHECK(composed > (std::int64_t{32} << 20));
  CHECK(composed < (std::int64_t{64} << 20));

  Graph g;
  CHECK(&g.kernelTarget() == hostTarget);
  CHECK(g.kernelSetting().target == hostTarget);
  g.setKernelTarget(*cudaTarget);
  CHECK(getString(g.attrs(), "kernel_target") == "cuda");
  CHECK(g.kernelSetting().target == cudaTarget);
  g.setKernelTarget(*hostTarget);
  CHECK(!g.attrs().contains("kernel_target"));
  CHECK(&defaultKernelTarget() == hostTarget);
  CHECK(!findKernelTarget("tpu"));
  CHECK(verify(g).ok());
  g.attrs()["kernel_target"] = std::string("tpu");
  CHECK(verify(g).message().find("kernel_target") != std::string::npos);
}

TEST_CASE("convolution workspace: one sample's im2col matrix (f64), oneDNN's answer (f32)") {
  const OpInfo* conv2d = findOp("conv2d");
  REQUIRE(conv2d);
  auto f64 = [](Shape s) { return TensorType{DType::f64, std::move(s)}; };
  const std::vector<TensorType> in{f64({2, 4, 8, 8}), f64({6, 2, 3, 3})};
  const std::vector<TensorType> out{f64({2, 6, 4, 4})};
  // Two samples of 16 output pixels in one GEMM (convChunkSamples): the chunk's column matrix
  // [C/g * kh * kw, 2 * 16] and its [O/g, 2 * 16] result, in doubles.
  CHECK(opWorkspaceBytes(*conv2d, in, conv(2, 1, 1, 2), out, 1) == (2 * 9 + 3) * 2 * 16 * 8);
  CHECK(opFlops(*conv2d, in, conv(2, 1, 1, 2), out) == 2 * 2 * 9 * 2 * 6 * 16);
  // 64x64 outputs (kConvGemmColumns pixels): one sample per GEMM, its column matrix only;
  // pointwise windows none.
  const std::vector<TensorType> big{f64({2, 4, 64, 64}), f64({6, 4, 3, 3})};
  const std::vector<TensorType> bigOut{f64({2, 6, 64, 64})};
  CHECK(opWorkspaceBytes(*conv2d, big, conv(1, 1, 1, 1), bigOut, 1) == 4 * 9 * 4096 * 8);
  const std::vector<TensorType> pin{f64({2, 4, 64, 64}), f64({6, 4, 1, 1})};
  CHECK(opWorkspaceBytes(*conv2d, pin, conv(1, 0, 1, 1), bigOut, 1) == 0);
  // f32: oneDNN's workspace for the pass (blocked copies of a chunk of samples, the weights'
  // copy and the scratchpad) where it has a kernel, at the thread count asked, within the im2col
  // rule's bytes (or one sample's copies); else the same im2col rule.
  const std::vector<TensorType> in32{f32({2, 4, 64, 64}), f32({6, 4, 3, 3})};
  const std::vector<TensorType> out32{f32({2, 6, 64, 64})};
  onednn::ConvShape shape{.n = 2, .c = 4, .h = 64, .w = 64, .o = 6, .kh = 3, .kw = 3, .oh = 64, .ow = 64,
                          .padding = {1, 1}};
  for (int threads : {1, 2}) {
    const std::int64_t im2col = 4 * 9 * 4096 * 4;
    const std::optional<onednn::ConvChunking> chosen =
        onednn::convChunking(shape, onednn::ConvPass::Forward, threads, im2col);
    CHECK(opWorkspaceBytes(*conv2d, in32, conv(1, 1, 1, 1), out32, threads) ==
          (chosen ? chosen->workspaceBytes : im2col));
    if (chosen)
      CHECK(chosen->workspaceBytes <=
            std::max(im2col, *onednn::convWorkspaceBytes(shape, onednn::ConvPass::Forward, threads, 1)));
  }
  CHECK(findOp("batch_norm")->batchStatistics);
  CHECK(findOp("running_stats_update")->sideEffects);
}

TEST_CASE("FLOP and workspace rules") {
  auto flops = [](std::string_view name, std::vector<TensorType> in, AttrMap attrs = {}) {
    const OpInfo& op = *findOp(name);
    auto out = inferResultTypes(op, in, attrs);
    REQUIRE(out.ok());
    return opFlops(op, in, attrs, *out);
  };
  // 2*M*N*K for matrix products, plus one add per output for the bias.
  CHECK(flops("matmul", {f32({2, 8, 16}), f32({2, 16, 4})}) == 2 * 2 * 8 * 4 * 16);
  CHECK(flops("linear", {f32({16, 256}), f32({10, 256}), f32({10})}) == 2 * 16 * 10 * 256 + 16 * 10);
  CHECK(flops("add", {f32({16, 256}), f32({256})}) == 16 * 256);
  CHECK(flops("embedding", {f32({256, 64}), i64({16})}) == 0);
  // cross_entropy materialises the log-probabilities: a workspace as large as the logits (and
  // nll_loss's 0-dim total weight).
  const OpInfo& ce = *findOp("cross_entropy");
  std::vector<TensorType> in{f32({32, 250, 40000}), i64({32, 250})};
  auto out = inferResultTypes(ce, in, {});
  REQUIRE(out.ok());
  CHECK(opWorkspaceBytes(ce, in, {}, *out, 1) == 1'280'000'004);
  CHECK(opBytesAccessed(ce, in, {}, *out, 1) == std::int64_t{1'280'000'004} + 1'280'000'000 + 32 * 250 * 8 + 4);

  // The fused LM-head loss holds one chunk of logits: 40000 classes x ceil(8000 / 16) = 500 rows
  // x 4 bytes, plus per-row columns (3 x 500), the 8000 row loss terms and 1 / N, never the
  // 1.28 GB of logits. Its FLOPs are the unfused forward's and backward's: three matrix products
  // of the logits' size, and 6 elementwise passes.
  const OpInfo& fused = *findOp("linear_cross_entropy");
  const AttrMap sixteen{{"chunks", I(16)}};
  std::vector<TensorType> fin{f32({32, 250, 768}), f32({40000, 768}), i64({32, 250})};
  auto fout = inferResultTypes(fused, fin, sixteen);
  REQUIRE(fout.ok());
  CHECK(opWorkspaceBytes(fused, fin, sixteen, *fout, 1) == (500 * 40000 + 3 * 500 + 8000 + 1) * 4);
  CHECK(linearCrossEntropyChunkRows(8000, 16) == 500);
  CHECK(linearCrossEntropyChunkRows(10, 3) == 4);
  CHECK(linearCrossEntropyChunkRows(10, 50) == 1);
  const std::int64_t logits = std::int64_t{8000} * 40000;
  CHECK(opFlops(fused, fin, sixteen, *fout) == 3 * 2 * logits * 768 + 6 * logits);
  // With an i32 target, the i64 copy of it too.
  std::vector<TensorType> narrow{f32({32, 250, 768}), f32({40000, 768}), {DType::i32, {32, 250}}};
  auto nout = inferResultTypes(fused, narrow, sixteen);
  REQUIRE(nout.ok());
  CHECK(opWorkspaceBytes(fused, narrow, sixteen, *nout, 1) == (500 * 40000 + 3 * 500 + 8000 + 1) * 4 + 8000 * 8);

  // rope's cos and sin tables [S, Dh/2] and the positions and frequencies they come from.
  const OpInfo& rope = *findOp("rope");
  const AttrMap ra{{"base", 1e4}, {"seq_dim", I(1)}, {"inverse", false}};
  std::vector<TensorType> rin{f32({2, 16, 4, 8})};
  auto rout = inferResultTypes(rope, rin, ra);
  REQUIRE(rout.ok());
  CHECK(opWorkspaceBytes(rope, rin, ra, *rout, 1) == (2 * 16 * 4 + 16 + 4) * 4);
}

// What the memory planner and the data-parallel runtime read from the table, for every op: a
// view op must say how its strides derive (else liveness cannot model it), no other op may;
// an op that starts communication must say its role.
