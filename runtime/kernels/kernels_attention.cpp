// Kernels of the fused attention ops (ir/ops_attention.cpp): FlashAttention-2's forward and
// backward on the host, one tile of scores per thread.
//
// Forward, per task (a query index f of the flattened leading axes, and a block of Br query
// rows): the rows' running maximum m, running sum l and output accumulator start at (-inf, 0,
// 0); for each block of Bc keys (with the causal mask, only blocks with some key j <= i):
//     s = scale q k^T;  m' = max(m, rowmax s);  p = exp(s - m');  l = l e^(m - m') + rowsum p;
//     acc = acc e^(m - m') + dropout(p) v;  m = m'
// then out = acc / l and lse = m + log l. Backward, per key head (the query indices that share
// it run on one thread, so dk and dv need no atomics): for each block of keys, for each block of
// queries that can see it (with the causal mask, the tile cut to the keys its rows see),
// p = exp(scale q k^T - lse) is recomputed, and
//     dv += dropout(p)^T dout;  dp = dropout'(dout v^T);  ds = p (dp - rowsum(dout * out));
//     dq += scale ds k;  dk += scale ds^T q
// The f32 tile products run on register-blocked vector kernels (tile_products.h: AVX-512 or
// AVX2 + FMA); f64 ones, and f32 on CPUs without those, on the BLAS the process already links
// (cblas_sgemm / cblas_dgemm, looked up once), or on plain loops when there is none.
//
// Memory: operands are read through their strides (tiles are gathered into the thread's slot);
// results are written in place; the only allocation is the workspace, one slot per intra-op
// thread (ir/attention_tiles.h), exactly the op table's declared bytes. The portable kernels
// (any device without its own) compose ATen calls a block of queries at a time instead
// (attention_composite.h), and refuse dropout, having no mask of the device's to draw.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "ir/attention_tiles.h"
#include "runtime/core/counter_rng.h"
#include "runtime/kernels/attention_composite.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/row_ops.h"
#include "runtime/kernels/tile_products.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// ---- tile products ----------------------------------------------------------------------------

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;  // CBLAS enumerators
template <class T>
using CblasGemm = void (*)(int, int, int, int, int, int, T, const T*, int, const T*, int, T, T*, int);

template <class T>
CblasGemm<T> cblasGemm() {
  static const CblasGemm<T> fn = reinterpret_cast<CblasGemm<T>>(
      ::dlsym(RTLD_DEFAULT, std::is_same_v<T, float> ? "cblas_sgemm" : "cblas_dgemm"));
  return fn;
}

// C[m, n] = alpha op(A) op(B) + beta C, row-major, op(X) = X^T when asked.
template <class T>
void gemm(bool transA, bool transB, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* A,
          std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if ((beta == 0.0f || beta == 1.0f) &&
        tiles::product(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta == 1.0f, C, ldc))
      return;
  if (CblasGemm<T> f = cblasGemm<T>()) {
    f(kRowMajor, transA ? kTrans : kNoTrans, transB ? kTrans : kNoTrans, static_cast<int>(m), static_cast<int>(n),
      static_cast<int>(k), alpha, A, static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
    return;
  }
  for (std::int64_t i = 0; i < m; ++i) {
    T* c = C + i * ldc;
    for (std::int64_t j = 0; j < n; ++j) c[j] = beta == T(0) ? T(0) : c[j] * beta;
    for (std::int64_t p = 0; p < k; ++p) {
      const T a = alpha * (transA ? A[p * lda + i] : A[i * lda + p]);
      if (transB)
        for (std::int64_t j = 0; j < n; ++j) c[j] += a * B[j * ldb + p];
      else
        for (std::int64_t j = 0; j < n; ++j) c[j] += a * B[p * ldb + j];
    }
  }
}

// ---- operands ---------------------------------------------------------------------------------

// One operand [leading..., rows, cols] read through its strides.
template <class T>
struct Strided {
  const T* data = nullptr;
  std::int64_t rowStride = 0, colStride = 0;

  // Copies rows [r0, r0 + rows) of the matrix at `base` into dst[rows, cols].
  void load(std::int64_t base, std::int64_t r0, std::int64_t rows, std::int64_t cols, T* dst) const {
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* src = data + base + (r0 + r) * rowStride;
      T* d = dst + r * cols;
      if (colStride == 1)
        std::copy(src, src + cols, d);
      else
        for (std::int64_t c = 0; c < cols; ++c) d[c] = src[c * colStride];
    }
  }
  // The dot product of row r of the matrix at `base` with x[cols].
  T rowDot(std::int64_t base, std::int64_t r, const T* x, std::int64_t cols) const {
    const T* row = data + base + r * rowStride;
    if (colStride == 1) return rows::dot(x, row, cols);
    T d = 0;
    for (std::int64_t c = 0; c < cols; ++c) d += x[c] * row[c * colStride];
    return d;
  }
};

template <class T>
Strided<T> strided(const at::Tensor& t) {
  const std::int64_t r = t.dim();
  return {t.data_ptr<T>(), t.stride(r - 2), t.stride(r - 1)};
}

// Element offsets of the matrix each query index f (over q's leading axes, row-major) reads in
// `t`, whose leading axes are q's or 1 (shared); with `flat`, the index of that matrix among
// t's own (k's key head, for the contiguous dk and dv) instead.
std::vector<std::int64_t> matrixOffsets(const at::Tensor& t, const at::Tensor& q, bool flat = false) {
  const std::int64_t lead = q.dim() - 2;
  std::int64_t count = 1;
  for (std::int64_t d = 0; d < lead; ++d) count *= q.size(d);
  std::vector<std::int64_t> offsets(count);
  for (std::int64_t f = 0; f < count; ++f) {
    std::int64_t rest = f, offset = 0, flatStride = 1;
    for (std::int64_t d = lead - 1; d >= 0; --d) {
      const std::int64_t idx = t.size(d) == 1 ? 0 : rest % q.size(d);
      rest /= q.size(d);
      offset += idx * (flat ? flatStride : t.stride(d));
      flatStride *= t.size(d);
    }
    offsets[f] = offset;
  }
  return offsets;
}

struct Dropout {
  double p = 0.0;
  RngStream rng;
  std::int64_t offset = 0;  // stream position of the probabilities' element 0
  float threshold = 0.0f;   // p on the 2^-24 grid of the uniforms: u >= threshold <=> kept

  bool on() const { return p > 0.0; }
};

Dropout dropoutOf(const KernelArgs& a) {
  Dropout d;
  d.p = ir::getFloat(a.node.attrs(), "p").value_or(0.0);
  if (!d.on()) return d;
  d.rng = RngStream{a.ctx.seed, a.ctx.step, intAttr(a.node, "rng")};
  d.offset = ir::getInt(a.node.attrs(), "rng_offset").value_or(0);
  d.threshold = dropoutThreshold(d.p);
  return d;
}

// The workspace: one slot of `slot` elements per intra-op thread, exactly the declared bytes.
at::Tensor workspace(const KernelArgs& a, std::int64_t slot, const at::TensorOptions& options, int threads) {
  const std::int64_t declared = a.node.workspaceBytes(threads);
  TORCH_CHECK(declared == threads * slot * static_cast<std::int64_t>(options.dtype().itemsize()),
              "attention: the declared workspace (", declared, " B) is not the kernel's tile slots");
  return at::empty({threads * slot}, options);
}

// A thread's slot cut into its parts (ir::AttentionTiling's order and sizes).
template <class T, size_t N>
std::array<T*, N> carve(T* slot, const std::array<std::int64_t, N>& parts) {
  std::array<T*, N> out;
  for (size_t i = 0; i < N; ++i) {
    out[i] = slot;
    slot += parts[i];
  }
  return out;
}

// With the causal mask a tile's rows see different numbers of its keys. The products run on
// groups of kCausalGroup rows (or keys), each cut to what its rows see, so at most a group's
// triangle of masked pairs is multiplied (about 1.1x the visible pairs at T = 128, where whole
// 64-row tiles multiplied 1.5x).
constexpr std::int64_t kCausalGroup = 16;

// Calls f(g0, rows, width) for the groups of query rows [i0 + g0, i0 + g0 + rows) of a tile
// against keys [j0, j0 + cols): width = the keys the group's last row sees (all `cols` without
// the mask); groups that see none are skipped.
template <class F>
void forQueryGroups(bool causal, std::int64_t i0, std::int64_t br, std::int64_t j0, std::int64_t cols, F f) {
  if (!causal) {
    f(std::int64_t{0}, br, cols);
    return;
  }
  for (std::int64_t g0 = 0; g0 < br; g0 += kCausalGroup) {
    const std::int64_t rows = std::min(kCausalGroup, br - g0);
    const std::int64_t width = std::clamp<std::int64_t>(i0 + g0 + rows - j0, 0, cols);
    if (width > 0) f(g0, rows, width);
  }
}

// Calls f(c0, keys, r0) for the groups of keys [j0 + c0, j0 + c0 + keys) of a tile's `width`:
// r0 = the tile's first query row that sees the group's first key (0 without the mask); groups
// no row of the tile sees are skipped.
template <class F>
void forKeyGroups(bool causal, std::int64_t i0, std::int64_t br, std::int64_t j0, std::int64_t width, F f) {
  if (!causal) {
    f(std::int64_t{0}, width, std::int64_t{0});
    return;
  }
  for (std::int64_t c0 = 0; c0 < width; c0 += kCausalGroup) {
    const std::int64_t r0 = std::clamp<std::int64_t>(j0 + c0 - i0, 0, br);
    if (r0 < br) f(c0, std::min(kCausalGroup, width - c0), r0);
  }
}

// ---- forward ----------------------------------------------------------------------------------

template <class T>
void attentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
                      at::Tensor& lse, bool causal, T scale, const Dropout& drop, T* ws, std::int64_t slot) {
  const std::int64_t r = q.dim(), S = q.size(r - 2), Skv = k.size(r - 2), Dh = q.size(r - 1), Dv = v.size(r - 1);
  const ir::AttentionTiling tiles = ir::AttentionTiling::of(S, Skv, Dh, Dv, drop.on());
  const std::int64_t Br = tiles.queryRows, Bc = tiles.keyRows;
  const std::vector<std::int64_t> qAt = matrixOffsets(q, q), kAt = matrixOffsets(k, q), vAt = matrixOffsets(v, q);
  const Strided<T> Q = strided<T>(q), K = strided<T>(k), V = strided<T>(v);
  T* outData = out.data_ptr<T>();
  T* lseData = lse.data_ptr<T>();
  const std::int64_t blocks = (S + Br - 1) / Br;
  const T keep = static_cast<T>(1.0 / (1.0 - drop.p));
  const T minusInf = -std::numeric_limits<T>::infinity();
  const auto tasks = static_cast<std::int64_t>(qAt.size()) * blocks;
  at::parallel_for(0, tasks, 1, [&](std::int64_t begin, std::int64_t end) {
    const auto [qt, kt, vt, s, acc, m, l, uniforms] = carve(ws + at::get_thread_num() * slot, tiles.forwardParts());
    auto* u = reinterpret_cast<float*>(uniforms);
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t f = task / blocks, i0 = task % blocks * Br, br = std::min(Br, S - i0);
      Q.load(qAt[f], i0, br, Dh, qt);
      std::fill(m, m + br, minusInf);
      std::fill(l, l + br, T(0));
      std::fill(acc, acc + br * Dv, T(0));
      const std::int64_t keyEnd = causal ? std::min(Skv, i0 + br) : Skv;
      for (std::int64_t j0 = 0; j0 < keyEnd; j0 += Bc) {
        const std::int64_t bc = std::min(Bc, keyEnd - j0);
        K.load(kAt[f], j0, bc, Dh, kt);
        V.load(vAt[f], j0, bc, Dv, vt);
        forQueryGroups(causal, i0, br, j0, bc, [&](std::int64_t g0, std::int64_t rows, std::int64_t width) {
          gemm<T>(false, true, rows, width, Dh, scale, qt + g0 * Dh, Dh, kt, Dh, T(0), s + g0 * bc, bc);
        });
        for (std::int64_t row = 0; row < br; ++row) {
          const std::int64_t i = i0 + row;
          T* sr = s + row * bc;
          const std::int64_t valid = causal ? std::clamp<std::int64_t>(i - j0 + 1, 0, bc) : bc;
          if (valid == 0) {
            std::fill(sr, sr + bc, T(0));
            continue;
          }
          const T mNew = std::max(m[row], rows::max(sr, valid));
          const T alpha = m[row] == minusInf ? T(0) : std::exp(m[row] - mNew);
          const T sum = rows::expShiftedSum(sr, valid, mNew);
          std::fill(sr + valid, sr + bc, T(0));
          l[row] = l[row] * alpha + sum;
          m[row] = mNew;
          rows::scale(acc + row * Dv, Dv, alpha);
          if (drop.on()) {
            uniformFloats(drop.rng, drop.offset + (f * S + i) * Skv + j0, valid, u);
            for (std::int64_t c = 0; c < valid; ++c) sr[c] = u[c] >= drop.threshold ? sr[c] * keep : T(0);
          }
        }
        forQueryGroups(causal, i0, br, j0, bc, [&](std::int64_t g0, std::int64_t rows, std::int64_t width) {
          gemm<T>(false, false, rows, Dv, width, T(1), s + g0 * bc, bc, vt, Dv, T(1), acc + g0 * Dv, Dv);
        });
      }
      T* o = outData + (f * S + i0) * Dv;
      for (std::int64_t row = 0; row < br; ++row) {
        const T inv = T(1) / l[row];
        for (std::int64_t d = 0; d < Dv; ++d) o[row * Dv + d] = acc[row * Dv + d] * inv;
        lseData[f * S + i0 + row] = m[row] + std::log(l[row]);
      }
    }
  });
}

// ---- backward ---------------------------------------------------------------------------------

template <class T>
void attentionBackward(const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& out, const at::Tensor& lse, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv,
                       bool causal, T scale, const Dropout& drop, T* ws, std::int64_t slot) {
  const std::int64_t r = q.dim(), S = q.size(r - 2), Skv = k.size(r - 2), Dh = q.size(r - 1), Dv = v.size(r - 1);
  const ir::AttentionTiling tiles = ir::AttentionTiling::of(S, Skv, Dh, Dv, drop.on());
  const std::int64_t Br = tiles.queryRows, Bc = tiles.keyRows;
  const std::vector<std::int64_t> qAt = matrixOffsets(q, q), kAt = matrixOffsets(k, q), vAt = matrixOffsets(v, q),
                                  doutAt = matrixOffsets(dout, q), outAt = matrixOffsets(out, q),
                                  keyHead = matrixOffsets(k, q, true);
  const Strided<T> Q = strided<T>(q), K = strided<T>(k), V = strided<T>(v), dO = strided<T>(dout),
                   O = strided<T>(out);
  const at::Tensor lseC = lse.contiguous();
  const T* lseData = lseC.data_ptr<T>();
  T* dqData = dq.data_ptr<T>();
  T* dkData = dk.data_ptr<T>();
  T* dvData = dv.data_ptr<T>();
  const std::int64_t keyHeads = k.numel() / (Skv * Dh);
  std::vector<std::vector<std::int64_t>> members(keyHeads);
  for (std::int64_t f = 0; f < static_cast<std::int64_t>(qAt.size()); ++f) members[keyHead[f]].push_back(f);
  const T keep = static_cast<T>(1.0 / (1.0 - drop.p));

  at::parallel_for(0, keyHeads, 1, [&](std::int64_t begin, std::int64_t end) {
    const auto [qt, dot, kt, vt, s, dp, dkAcc, dvAcc, lseT, rowDot, uniforms] =
        carve(ws + at::get_thread_num() * slot, tiles.backwardParts());
    auto* u = reinterpret_cast<float*>(uniforms);
    for (std::int64_t g = begin; g < end; ++g) {
      T* dkHead = dkData + g * Skv * Dh;
      T* dvHead = dvData + g * Skv * Dv;
      std::fill(dkHead, dkHead + Skv * Dh, T(0));
      std::fill(dvHead, dvHead + Skv * Dv, T(0));
      for (std::int64_t f : members[g]) {
        T* dqHead = dqData + f * S * Dh;
        std::fill(dqHead, dqHead + S * Dh, T(0));
        for (std::int64_t j0 = 0; j0 < Skv; j0 += Bc) {
          const std::int64_t bc = std::min(Bc, Skv - j0);
          K.load(kAt[f], j0, bc, Dh, kt);
          V.load(vAt[f], j0, bc, Dv, vt);
          std::fill(dkAcc, dkAcc + bc * Dh, T(0));
          std::fill(dvAcc, dvAcc + bc * Dv, T(0));
          for (std::int64_t i0 = causal ? j0 : 0; i0 < S; i0 += Br) {
            const std::int64_t br = std::min(Br, S - i0);
            // With the causal mask the block's rows see keys up to i0 + br - 1 only: the tile's
            // products stop there (the columns beyond would be exact zeros).
            const std::int64_t width = causal ? std::min(bc, i0 + br - j0) : bc;
            Q.load(qAt[f], i0, br, Dh, qt);
            dO.load(doutAt[f], i0, br, Dv, dot);
            for (std::int64_t row = 0; row < br; ++row) {
              lseT[row] = lseData[f * S + i0 + row];
              rowDot[row] = O.rowDot(outAt[f], i0 + row, dot + row * Dv, Dv);
            }
            const auto visible = [&](std::int64_t row) {  // the keys of the tile row `row` sees
              return causal ? std::clamp<std::int64_t>(i0 + row - j0 + 1, 0, width) : width;
            };
            const auto byQueryGroup = [&](auto product) { forQueryGroups(causal, i0, br, j0, width, product); };
            const auto byKeyGroup = [&](auto product) { forKeyGroups(causal, i0, br, j0, width, product); };
            byQueryGroup([&](std::int64_t g0, std::int64_t rows, std::int64_t w) {
              gemm<T>(false, true, rows, w, Dh, scale, qt + g0 * Dh, Dh, kt, Dh, T(0), s + g0 * bc, bc);
            });
            for (std::int64_t row = 0; row < br; ++row) {
              T* sr = s + row * bc;
              const std::int64_t valid = visible(row);
              rows::expShifted(sr, valid, lseT[row]);
              std::fill(sr + valid, sr + width, T(0));
            }
            if (drop.on()) {  // dv takes the dropped probabilities; dp holds them for the product
              for (std::int64_t row = 0; row < br; ++row) {
                uniformFloats(drop.rng, drop.offset + (f * S + i0 + row) * Skv + j0, width, u);
                for (std::int64_t c = 0; c < width; ++c)
                  dp[row * bc + c] = u[c] >= drop.threshold ? s[row * bc + c] * keep : T(0);
              }
            }
            const T* kept = drop.on() ? dp : s;
            byKeyGroup([&](std::int64_t c0, std::int64_t keys, std::int64_t r0) {
              gemm<T>(true, false, keys, Dv, br - r0, T(1), kept + r0 * bc + c0, bc, dot + r0 * Dv, Dv, T(1),
                      dvAcc + c0 * Dv, Dv);
            });
            byQueryGroup([&](std::int64_t g0, std::int64_t rows, std::int64_t w) {
              gemm<T>(false, true, rows, w, Dv, T(1), dot + g0 * Dv, Dv, vt, Dv, T(0), dp + g0 * bc, bc);
            });
            for (std::int64_t row = 0; row < br; ++row) {  // ds = p (dp - rowsum(dO * O)); 0 where p is 0
              T* sr = s + row * bc;
              T* pr = dp + row * bc;
              const std::int64_t valid = visible(row);
              if (drop.on()) {
                uniformFloats(drop.rng, drop.offset + (f * S + i0 + row) * Skv + j0, valid, u);
                for (std::int64_t c = 0; c < valid; ++c) pr[c] = u[c] >= drop.threshold ? pr[c] * keep : T(0);
              }
              rows::mulShifted(sr, pr, valid, rowDot[row]);
            }
            byQueryGroup([&](std::int64_t g0, std::int64_t rows, std::int64_t w) {
              gemm<T>(false, false, rows, Dh, w, scale, s + g0 * bc, bc, kt, Dh, T(1), dqHead + (i0 + g0) * Dh, Dh);
            });
            byKeyGroup([&](std::int64_t c0, std::int64_t keys, std::int64_t r0) {
              gemm<T>(true, false, keys, Dh, br - r0, scale, s + r0 * bc + c0, bc, qt + r0 * Dh, Dh, T(1),
                      dkAcc + c0 * Dh, Dh);
            });
          }
          for (std::int64_t e = 0; e < bc * Dh; ++e) dkHead[j0 * Dh + e] += dkAcc[e];
          for (std::int64_t e = 0; e < bc * Dv; ++e) dvHead[j0 * Dv + e] += dvAcc[e];
        }
      }
    }
  });
}

// ---- kernels ----------------------------------------------------------------------------------

// The portable kernels: the op composed of ATen calls a block of queries at a time
// (attention_composite.h), with no dropout mask to draw; the host runs the tiled kernels above.
Results attentionKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a, 0);
  at::Tensor lse = resultBuffer(a, 1);
  composedAttention(a.operands[0], a.operands[1], a.operands[2], out, lse, attentionCallOf(a.node));
  return {out, lse};
}

// attention_backward's operands, results and attributes, by name.
struct BackwardArgs {
  const at::Tensor &dout, &q, &k, &v, &out, &lse;
  at::Tensor dq, dk, dv;
  bool causal;
  double scale;
  explicit BackwardArgs(const KernelArgs& a)
      : dout(a.operands[0]), q(a.operands[1]), k(a.operands[2]), v(a.operands[3]), out(a.operands[4]),
        lse(a.operands[5]), dq(resultBuffer(a, 0)), dk(resultBuffer(a, 1)), dv(resultBuffer(a, 2)),
        causal(ir::getBool(a.node.attrs(), "causal").value_or(false)), scale(floatAttr(a.node, "scale")) {}
};

Results attentionBackwardKernel(const KernelArgs& a) {
  BackwardArgs b(a);
  composedAttentionBackward(b.dout, b.q, b.k, b.v, b.out, b.lse, b.dq, b.dk, b.dv, attentionCallOf(a.node));
  return {b.dq, b.dk, b.dv};
}

Results hostAttentionKernel(const KernelArgs& a) {
  const at::Tensor& q = a.operands[0];
  const at::Tensor& k = a.operands[1];
  const at::Tensor& v = a.operands[2];
  at::Tensor out = resultBuffer(a, 0);
  at::Tensor lse = resultBuffer(a, 1);
  const bool causal = ir::getBool(a.node.attrs(), "causal").value_or(false);
  const double scale = floatAttr(a.node, "scale");
  const Dropout drop = dropoutOf(a);
  const std::int64_t r = q.dim();
  const ir::AttentionTiling tiles = ir::AttentionTiling::of(q.size(r - 2), k.size(r - 2), q.size(r - 1),
                                                            v.size(r - 1), drop.on());
  const int threads = at::get_num_threads();
  at::Tensor ws = workspace(a, tiles.forwardSlot(), out.options(), threads);
  if (q.scalar_type() == at::kDouble)
    attentionForward<double>(q, k, v, out, lse, causal, scale, drop, ws.data_ptr<double>(), tiles.forwardSlot());
  else
    attentionForward<float>(q, k, v, out, lse, causal, static_cast<float>(scale), drop, ws.data_ptr<float>(),
                            tiles.forwardSlot());
  return {out, lse};
}

Results hostAttentionBackwardKernel(const KernelArgs& a) {
  BackwardArgs b(a);
  const at::Tensor &dout = b.dout, &q = b.q, &k = b.k, &v = b.v, &out = b.out, &lse = b.lse;
  at::Tensor &dq = b.dq, &dk = b.dk, &dv = b.dv;
  const bool causal = b.causal;
  const double scale = b.scale;
  const Dropout drop = dropoutOf(a);
  const std::int64_t r = q.dim();
  const ir::AttentionTiling tiles = ir::AttentionTiling::of(q.size(r - 2), k.size(r - 2), q.size(r - 1),
                                                            v.size(r - 1), drop.on());
  const int threads = at::get_num_threads();
  at::Tensor ws = workspace(a, tiles.backwardSlot(), dq.options(), threads);
  if (q.scalar_type() == at::kDouble)
    attentionBackward<double>(dout, q, k, v, out, lse, dq, dk, dv, causal, scale, drop, ws.data_ptr<double>(),
                              tiles.backwardSlot());
  else
    attentionBackward<float>(dout, q, k, v, out, lse, dq, dk, dv, causal, static_cast<float>(scale), drop,
                             ws.data_ptr<float>(), tiles.backwardSlot());
  return {dq, dk, dv};
}

const KernelEntry kAttention[] = {
    {"attention", attentionKernel},
    {"attention_backward", attentionBackwardKernel},
};
const KernelEntry kHostAttention[] = {
    {"attention", hostAttentionKernel},
    {"attention_backward", hostAttentionBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> attentionKernels() { return kAttention; }
std::span<const KernelEntry> hostAttentionKernels() { return kHostAttention; }

}  // namespace gradc::runtime
