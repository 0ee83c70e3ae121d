// 2-D convolutions (forward, input gradient, weight gradient) on oneDNN's direct kernels, into
// and out of the caller's plain NCHW memory, everything else in one workspace the caller owns.
//
// oneDNN's fast convolution kernels read and write blocked layouts (nChw16c and blocked
// weights; the plain-layout fallback is im2col + GEMM). A pass therefore reorders its plain
// operands into blocked copies, runs the convolution, and reorders its blocked result into the
// plain one, as PyTorch's eager convolution does. The blocked copies and oneDNN's scratchpad
// live in the workspace, whose size the op table asks for while planning (convWorkspaceBytes)
// and the runtime allocates exactly (runConv): measured == planned.
//
// A pass may run the batch in chunks of samples, so that its blocked copies hold one chunk, not
// the batch: the weights (or the weight gradient) are copied once, each chunk's activations are
// copied in, convolved and copied out, and the weight gradient sums the chunks' gradients into
// the plain result. convChunking picks the largest chunk within a byte limit (the op table
// gives the im2col kernel's workspace, so choosing oneDNN never costs the plan more memory than
// the kernel it replaces, beyond one sample's copies).
//
// No LibTorch here (the op table links this). Without oneDNN (GRADC_WITH_ONEDNN off), or for a
// problem oneDNN has no blocked kernel for, the answers are nullopt and the caller keeps its
// own kernel.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace gradc::onednn {

enum class ConvPass { Forward, InputGrad, WeightGrad };

// y[n, o, oh, ow] = sum over the group's channels and the window of x * w (+ bias[o]); f32,
// PyTorch's conv2d conventions (symmetric padding, dilation 1 = dense, weights [O, C/g, kh, kw]).
struct ConvShape {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t o = 0, kh = 0, kw = 0;       // weights [o, c / groups, kh, kw]
  std::int64_t oh = 0, ow = 0;              // output
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = false;  // Forward only
};

// The workspace one pass needs with `threads` intra-op threads, running `chunk` samples at a time
// (1 <= chunk <= shape.n): its blocked copies and its scratchpad. nullopt: oneDNN has no blocked
// kernel for it here.
std::optional<std::int64_t> convWorkspaceBytes(const ConvShape& shape, ConvPass pass, int threads,
                                               std::int64_t chunk);

// The largest chunk whose workspace is at most max(limitBytes, the one-sample workspace), and
// that workspace (a chunk c that fits and c + 1 does not, or the batch), remembered per question.
// nullopt: no blocked kernel.
struct ConvChunking {
  std::int64_t chunk = 0;
  std::int64_t workspaceBytes = 0;
};
std::optional<ConvChunking> convChunking(const ConvShape& shape, ConvPass pass, int threads, std::int64_t limitBytes);

// Runs one pass, `chunk` samples at a time, with the calling thread's intra-op thread count
// (the workspace was sized for it). Plain operands and result
// (contiguous NCHW / OIHW): Forward reads x, w, bias and writes y; InputGrad reads gy, w and
// writes gx; WeightGrad reads gy, x and writes gw. `workspace` holds `workspaceBytes` bytes.
// Empty on success, else why nothing ran (no kernel, or a workspace smaller than needed).
struct ConvBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* gy = nullptr;
  void* y = nullptr;   // Forward's result
  void* gx = nullptr;  // InputGrad's result
  void* gw = nullptr;  // WeightGrad's result
};
std::string runConv(const ConvShape& shape, ConvPass pass, std::int64_t chunk, const ConvBuffers& buffers,
                    void* workspace, std::int64_t workspaceBytes);

// The kernel oneDNN runs for the pass over the whole batch ("jit:avx512_core"); empty when none.
std::string convImplementation(const ConvShape& shape, ConvPass pass, int threads);

}  // namespace gradc::onednn
