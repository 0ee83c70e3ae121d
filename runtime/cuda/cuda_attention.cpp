#include "runtime/cuda/cuda_attention.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/cuda/aten_element.h"
#include "runtime/cuda/dropout_kernel.h"
#include "runtime/core/counter_rng.h"
#include "runtime/kernels/attention_composite.h"

#if __has_include(<ATen/ops/_scaled_dot_product_efficient_attention.h>)
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_backward.h>
#define GRADC_EFFICIENT_ATTENTION 1
#endif

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

using cuda::elementOf;

// The node's call for the composed kernels, its dropout drawn by the CUDA dropout kernel at the
// stream positions the dropout op on the unfused probabilities draws (runs of a block's rows).
struct ComposedCall {
  AttentionCall call;
  AttentionDropout drop;

  explicit ComposedCall(const KernelArgs& a) : call(attentionCallOf(a.node)) {
    if (call.p <= 0.0) return;
    const RngStream rng{a.ctx.seed, a.ctx.step, intAttr(a.node, "rng")};
    const double p = call.p;
    drop = [rng, p](at::Tensor& block, std::int64_t first, std::int64_t run, std::int64_t stride) {
      std::optional<cuda::Element> element = elementOf(block.scalar_type());
      TORCH_CHECK(element && block.is_contiguous(), "fused attention's dropout on ", block.device(),
                  ": no kernel for ", block.scalar_type());
      const PhiloxKey key = philoxKey(rng);
      cuda::DropoutLaunch l;
      l.element = *element;
      l.x = block.data_ptr();
      l.y = block.data_ptr();
      l.n = block.numel();
      l.offset = static_cast<std::uint64_t>(first);
      l.run = run;
      l.runStride = static_cast<std::uint64_t>(stride);
      l.step = static_cast<std::uint64_t>(rng.step);
      l.k0 = key[0];
      l.k1 = key[1];
      l.threshold = dropoutThreshold(p);
      l.scale = 1.0 / (1.0 - p);
      l.stream = at::cuda::getCurrentCUDAStream(block.device().index()).stream();
      if (const char* e = cuda::launchDropout(l)) TORCH_CHECK(false, "fused attention's dropout on ", block.device(), ": ", e);
    };
    call.drop = &drop;
  }
  ComposedCall(const ComposedCall&) = delete;
  ComposedCall& operator=(const ComposedCall&) = delete;
};

Results composedAttentionKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a, 0);
  at::Tensor lse = resultBuffer(a, 1);
  c10::cuda::CUDAGuard guard(out.device());
  const ComposedCall c(a);
  composedAttention(a.operands[0], a.operands[1], a.operands[2], out, lse, c.call);
  return {out, lse};
}

Results composedAttentionBackwardKernel(const KernelArgs& a) {
  at::Tensor dq = resultBuffer(a, 0), dk = resultBuffer(a, 1), dv = resultBuffer(a, 2);
  c10::cuda::CUDAGuard guard(dq.device());
  const ComposedCall c(a);
  composedAttentionBackward(a.operands[0], a.operands[1], a.operands[2], a.operands[3], a.operands[4], a.operands[5],
                            dq, dk, dv, c.call);
  return {dq, dk, dv};
}

#if defined(GRADC_EFFICIENT_ATTENTION)

// The node's tensors as the fused kernel takes them, [N, H, S, D], when it runs the node.
struct Fitted {
  at::Tensor q, k, v;
  bool ok = false;
};

// t as [N, H, S, D]: its leading axes merged into N (a copy where they cannot be in place).
at::Tensor asFour(const at::Tensor& t) {
  if (t.dim() == 4) return t;
  if (t.dim() == 3) return t.unsqueeze(1);
  if (t.dim() == 2) return t.unsqueeze(0).unsqueeze(0);
  return t.reshape({-1, 1, t.size(-2), t.size(-1)});
}

// t in the layout the fused kernel's aligned variants read: contiguous rows whose strides and
// address are multiples of 8 elements (16 bytes). A copy where t is not (measured beside the
// plan, which declares the common case: operands that are).
at::Tensor aligned(const at::Tensor& t) {
  bool ok = t.stride(-1) == 1 && reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0;
  for (std::int64_t d = 0; d + 1 < t.dim(); ++d) ok = ok && t.stride(d) % 8 == 0;
  return ok ? t : t.contiguous();
}

// Whether the fused kernel runs the node: the op table's rule (ir::AttentionChunks::cudaFused),
// which the plan's declared workspace follows.
bool fusedRuns(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ir::Node& node) {
  const bool dropout = ir::getFloat(node.attrs(), "p").value_or(0.0) > 0.0;
  return attentionChunksOf(q, k, v, false, dropout).cudaFused(q.scalar_type() == at::kFloat);
}

Fitted fit(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ir::Node& node) {
  Fitted f;
  if (!fusedRuns(q, k, v, node)) return f;
  f.q = asFour(aligned(q));
  f.k = asFour(aligned(k));
  f.v = asFour(aligned(v));
  f.ok = true;
  return f;
}

bool causalOf(const ir::Node& n) { return ir::getBool(n.attrs(), "causal").value_or(false); }

Results attentionKernel(const KernelArgs& a) {
  const at::Tensor &q = a.operands[0], &k = a.operands[1], &v = a.operands[2];
  const Fitted f = fit(q, k, v, a.node);
  if (!f.ok) return composedAttentionKernel(a);
  at::Tensor out = resultBuffer(a, 0);
  at::Tensor lse = resultBuffer(a, 1);
  c10::cuda::CUDAGuard guard(q.device());
  const auto results = at::_scaled_dot_product_efficient_attention(
      f.q, f.k, f.v, std::nullopt, /*compute_log_sumexp=*/true, 0.0, causalOf(a.node), floatAttr(a.node, "scale"));
  const at::Tensor& o = std::get<0>(results);
  // The kernel's log-sum-exp rows are padded to a multiple of 32 queries, in f32.
  const at::Tensor rows = std::get<1>(results).narrow(-1, 0, q.size(-2));
  out.view(o.sizes()).copy_(o);
  lse.view(rows.sizes()).copy_(rows);
  return {out, lse};
}

Results attentionBackwardKernel(const KernelArgs& a) {
  const at::Tensor &dout = a.operands[0], &q = a.operands[1], &k = a.operands[2], &v = a.operands[3];
  const at::Tensor &out = a.operands[4], &lse = a.operands[5];
  const Fitted f = fit(q, k, v, a.node);
  if (!f.ok) return composedAttentionBackwardKernel(a);
  at::Tensor dq = resultBuffer(a, 0), dk = resultBuffer(a, 1), dv = resultBuffer(a, 2);
  c10::cuda::CUDAGuard guard(q.device());
  // The log-sum-exp in the kernel's layout: f32, rows padded to a multiple of 32 queries.
  const std::int64_t rows = q.size(-2), padded = (rows + 31) / 32 * 32;
  at::Tensor lse32 = at::zeros({f.q.size(0), f.q.size(1), padded}, q.options().dtype(at::kFloat));
  lse32.narrow(-1, 0, rows).copy_(lse.reshape({f.q.size(0), f.q.size(1), rows}));
  // Without dropout the kernel reads no RNG state: the seed and offset stay undefined.
  const auto grads = at::_scaled_dot_product_efficient_attention_backward(
      asFour(aligned(dout)), f.q, f.k, f.v, at::Tensor(), asFour(aligned(out)), lse32, at::Tensor(), at::Tensor(), 0.0,
      {true, true, true, false}, causalOf(a.node), floatAttr(a.node, "scale"));
  for (auto [planned, g] : {std::pair{&dq, &std::get<0>(grads)}, std::pair{&dk, &std::get<1>(grads)},
                            std::pair{&dv, &std::get<2>(grads)}})
    planned->view(g->sizes()).copy_(*g);
  return {dq, dk, dv};
}

const KernelEntry kEntries[] = {
    {"attention", attentionKernel},
    {"attention_backward", attentionBackwardKernel},
};
#else
const KernelEntry kEntries[] = {
    {"attention", composedAttentionKernel},
    {"attention_backward", composedAttentionBackwardKernel},
};
#endif

}  // namespace

std::span<const KernelEntry> cudaAttentionKernels() { return kEntries; }

}  // namespace gradc::runtime
