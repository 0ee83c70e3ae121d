// bf16 and f16 products on the host (see low_precision_products.h).
#include "runtime/kernels/low_precision_products.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <vector>

#include "ir/blas_layout.h"
#include "onednn/gemm.h"
#include "runtime/kernels/widened_products.h"

namespace gradc::runtime {

namespace {

// Host tensors: only the host's kernels call these.
bool applies(const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf; }

// The matrices of a 2-D or 3-D operand as oneDNN reads them; a batch stride of 0 (an operand
// expanded over the batch) is one matrix shared by every product. Strides of extent-1 axes are
// set to the dense ones (ATen leaves them arbitrary).
onednn::MatrixLayout layoutOf(const at::Tensor& t) {
  const int r = static_cast<int>(t.dim());
  onednn::MatrixLayout l;
  l.rows = t.size(r - 2);
  l.cols = t.size(r - 1);
  l.rowStride = t.stride(r - 2);
  l.colStride = t.stride(r - 1);
  if (l.rows == 1 && l.colStride == 1) l.rowStride = l.cols;
  if (l.cols == 1 && l.rowStride == 1) l.colStride = l.rows;
  if (l.rows == 1 && l.cols == 1) l.rowStride = l.colStride = 1;
  if (r == 3 && t.stride(0) != 0) {
    l.batch = t.size(0);
    l.batchStride = t.stride(0);
  }
  return l;
}

// The operand as the BLAS call reads it: copied when its matrices are not BLAS-compatible.
at::Tensor readable(const at::Tensor& t) {
  const int r = static_cast<int>(t.dim());
  return ir::blasCompatible(t.size(r - 2), t.size(r - 1), t.stride(r - 2), t.stride(r - 1)) ? t : t.contiguous();
}

// A oneDNN operand as the widened kernel reads it: a layout of batch 1 is shared.
WidenedOperand widenedOperand(const onednn::MatrixLayout& l, const void* data) {
  return {data, l.batch == 1 ? 0 : l.batchStride, l.rowStride, l.colStride};
}

// Runs the product on this process's route, with one allocation of exactly `scratchBytes`
// (declared workspace), made whether or not the route then needs all of it, so the measured
// bytes are the planned ones. `out` is dense [batch, m, n].
bool runProduct(std::int64_t scratchBytes, const onednn::Product& product, const at::Tensor& a, const at::Tensor& b,
                const at::Tensor* bias, const at::Tensor& out) {
  if (scratchBytes <= 0) return false;
  at::Tensor scratch = at::empty({scratchBytes}, a.options().dtype(at::kByte));
  if (a.scalar_type() == at::kBFloat16 && onednn::bf16Route() == onednn::Bf16Route::kOneDnn)
    return onednn::run(product, a.data_ptr(), b.data_ptr(), bias ? bias->data_ptr() : nullptr, out.data_ptr(),
                       scratch.data_ptr(), scratchBytes)
        .empty();
  const WidenedProduct widened{.dtype = a.scalar_type(),
                               .batch = product.batch,
                               .m = product.a.rows,
                               .k = product.a.cols,
                               .n = product.b.cols,
                               .a = widenedOperand(product.a, a.data_ptr()),
                               .b = widenedOperand(product.b, b.data_ptr()),
                               .bias = bias ? bias->data_ptr() : nullptr,
                               .c = out.data_ptr(),
                               .ldc = product.b.cols,
                               .accumulate = product.accumulate};
  return runWidenedProduct(widened, scratch.data_ptr(), scratchBytes);
}

std::int64_t declaredWorkspace(const ir::Node& node) { return node.workspaceBytes(at::get_num_threads()); }

}  // namespace

bool lowPrecisionProduct2d(const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias, const at::Tensor& out,
                           std::int64_t scratchBytes, bool accumulate) {
  if (!applies(a)) return false;
  const at::Tensor ra = readable(a), rb = readable(b);
  const at::Tensor cb = bias ? bias->contiguous() : at::Tensor();
  onednn::Product p{.a = layoutOf(ra), .b = layoutOf(rb), .bias = bias != nullptr, .accumulate = accumulate};
  return runProduct(scratchBytes, p, ra, rb, bias ? &cb : nullptr, out);
}

bool lowPrecisionProduct2d(const ir::Node& node, const at::Tensor& a, const at::Tensor& b, const at::Tensor* bias,
                           const at::Tensor& out) {
  if (!applies(a)) return false;  // no workspace lookup for products that stay on ATen
  return lowPrecisionProduct2d(a, b, bias, out, declaredWorkspace(node));
}

bool lowPrecisionMatmul(const ir::Node& node, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  if (!applies(a)) return false;
  const std::int64_t ra = a.dim(), rb = b.dim();
  const std::int64_t k = a.size(-1), n = b.size(-1);
  if (ra == 2 && rb == 2) return lowPrecisionProduct2d(node, a, b, nullptr, out);
  if (ir::matmulFoldsRows(static_cast<int>(ra), static_cast<int>(rb), a.sizes().data(), a.strides().data()))
    return lowPrecisionProduct2d(node, a.reshape({-1, k}), b, nullptr, out.view({-1, n}));
  // Batched: both operands expanded to the common batch and reshaped to [P, rows, cols]
  // (a view where the strides allow one, a copy otherwise, as at::matmul does).
  std::vector<std::int64_t> batch(out.sizes().begin(), out.sizes().end() - 2);
  std::int64_t products = 1;
  for (std::int64_t d : batch) products *= d;
  auto folded = [&](const at::Tensor& t) {
    std::vector<std::int64_t> shape = batch;
    shape.push_back(t.size(-2));
    shape.push_back(t.size(-1));
    return readable(t.expand(shape).reshape({products, t.size(-2), t.size(-1)}));
  };
  const at::Tensor fa = folded(a), fb = folded(b);
  onednn::Product p{.batch = products, .batched = true, .a = layoutOf(fa), .b = layoutOf(fb)};
  return runProduct(declaredWorkspace(node), p, fa, fb, nullptr, out.view({products, a.size(-2), n}));
}

}  // namespace gradc::runtime
