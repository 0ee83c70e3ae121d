#include "runtime/cuda/cuda_attention.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#if __has_include(<ATen/ops/_scaled_dot_product_efficient_attention.h>)
#include <ATen/ops/_scaled_dot_product_efficient_attention.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_backward.h>
#define GRADC_EFFICIENT_ATTENTION 1
#endif

namespace gradc::runtime {
namespace {

#if defined(GRADC_EFFICIENT_ATTENTION)
using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// The node's tensors as the fused kernel takes them, [N, H, S, D] (a view: no copy), or
// undefined when they do not fit it (see the header).
struct Fitted {
  at::Tensor q, k, v;
  bool ok = false;
};

at::Tensor asFour(const at::Tensor& t) {
  if (t.dim() == 4) return t;
  std::vector<std::int64_t> shape{1};
  for (std::int64_t d = 0; d + 2 < t.dim(); ++d) shape[0] *= t.size(d);
  shape.insert(shape.end(), {1, t.size(-2), t.size(-1)});
  if (t.dim() == 3) return t.unsqueeze(1);
  return t.view(shape);  // throws when the leading axes cannot be merged without a copy
}

Fitted fit(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ir::Node& node) {
  Fitted f;
  const at::ScalarType t = q.scalar_type();
  if (t != at::kFloat && t != at::kHalf && t != at::kBFloat16) return f;
  if (ir::getFloat(node.attrs(), "p").value_or(0.0) > 0.0) return f;
  if (q.dim() < 3 || k.dim() != q.dim() || v.dim() != q.dim()) return f;
  for (std::int64_t d = 0; d + 2 < q.dim(); ++d)
    if (k.size(d) != q.size(d) || v.size(d) != q.size(d)) return f;
  // The fused kernel's aligned variants: contiguous rows whose length, strides and address
  // are multiples of 8 elements (16 bytes in f16/bf16).
  for (const at::Tensor* x : {&q, &k, &v}) {
    if (x->stride(-1) != 1 || x->size(-1) % 8 != 0) return f;
    for (std::int64_t d = 0; d + 1 < x->dim(); ++d)
      if (x->stride(d) % 8 != 0) return f;
    if (reinterpret_cast<std::uintptr_t>(x->data_ptr()) % 16 != 0) return f;
  }
  try {
    f.q = asFour(q);
    f.k = asFour(k);
    f.v = asFour(v);
  } catch (const c10::Error&) {
    return f;
  }
  f.ok = true;
  return f;
}

bool causalOf(const ir::Node& n) { return ir::getBool(n.attrs(), "causal").value_or(false); }

Results attentionKernel(const KernelArgs& a) {
  const at::Tensor &q = a.operands[0], &k = a.operands[1], &v = a.operands[2];
  const Fitted f = fit(q, k, v, a.node);
  if (!f.ok) return (*findPortableKernel("attention"))(a);
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
  if (!f.ok || dout.stride(-1) != 1 || out.stride(-1) != 1) return (*findPortableKernel("attention_backward"))(a);
  at::Tensor dq = resultBuffer(a, 0), dk = resultBuffer(a, 1), dv = resultBuffer(a, 2);
  c10::cuda::CUDAGuard guard(q.device());
  // The log-sum-exp in the kernel's layout: f32, rows padded to a multiple of 32 queries.
  const std::int64_t rows = q.size(-2), padded = (rows + 31) / 32 * 32;
  at::Tensor lse32 = at::zeros({f.q.size(0), f.q.size(1), padded}, q.options().dtype(at::kFloat));
  lse32.narrow(-1, 0, rows).copy_(lse.reshape({f.q.size(0), f.q.size(1), rows}));
  // Without dropout the kernel reads no RNG state: the seed and offset stay undefined.
  const auto grads = at::_scaled_dot_product_efficient_attention_backward(
      asFour(dout), f.q, f.k, f.v, at::Tensor(), asFour(out), lse32, at::Tensor(), at::Tensor(), 0.0,
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
#endif

}  // namespace

std::span<const KernelEntry> cudaAttentionKernels() {
#if defined(GRADC_EFFICIENT_ATTENTION)
  return kEntries;
#else
  return {};
#endif
}

}  // namespace gradc::runtime
