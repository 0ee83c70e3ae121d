// The host's own layer norm, forward and backward, for f32 and f64 rows read contiguously: one
// task per block of rows on the intra-op threads, each row in the vector loops of
// runtime/kernels/row_ops.h. ATen's CPU kernel (what the portable table calls) took 290 us for a
// [2048, 256] forward on this project's machine, where an add of the same tensors takes 50 us
// (docs/benchmarks.md has the step-level figures). Other dtypes, empty rows and strided operands
// take the portable kernels.
//
// Memory: the forward allocates nothing; the backward's weight and bias gradients are summed
// over rows in one [2, d] slot per intra-op thread, added up in thread order at the end: the
// op table's declared workspace (ir/ops_training.cpp), exactly.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>

#include "runtime/kernels/kernels.h"
#include "runtime/kernels/row_ops.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// All operands and results f32 (or all f64) and contiguous, rows of d > 0 elements.
bool ownPath(const KernelArgs& a, const std::vector<at::Tensor>& results, std::int64_t d) {
  const at::ScalarType t = a.operands[0].scalar_type();
  if ((t != at::kFloat && t != at::kDouble) || d == 0) return false;
  const auto fits = [t](const at::Tensor& x) { return x.scalar_type() == t && x.is_contiguous(); };
  return std::all_of(a.operands.begin(), a.operands.end(), fits) && std::all_of(results.begin(), results.end(), fits);
}

template <class T>
void forwardRows(const KernelArgs& a, at::Tensor& y, at::Tensor& mean, at::Tensor& rstd, std::int64_t rows,
                 std::int64_t d) {
  const T* x = a.operands[0].data_ptr<T>();
  const T* w = a.operands[1].data_ptr<T>();
  const T* b = a.operands[2].data_ptr<T>();
  T* out = y.data_ptr<T>();
  T* m = mean.data_ptr<T>();
  T* r = rstd.data_ptr<T>();
  const T eps = static_cast<T>(floatAttr(a.node, "eps"));
  at::parallel_for(0, rows, rows::rowsPerTask(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const rows::Moments<T> s = rows::layerNorm(x + row * d, w, b, out + row * d, d, eps);
      m[row] = s.mean;
      r[row] = s.rstd;
    }
  });
}

Results hostLayerNormKernel(const KernelArgs& a) {
  at::Tensor y = resultBuffer(a, 0), mean = resultBuffer(a, 1), rstd = resultBuffer(a, 2);
  const std::int64_t d = a.operands[0].dim() ? a.operands[0].size(-1) : 0;
  if (!ownPath(a, {y, mean, rstd}, d)) return (*findPortableKernel("layer_norm"))(a);
  const std::int64_t rows = a.operands[0].numel() / d;
  if (a.operands[0].scalar_type() == at::kDouble)
    forwardRows<double>(a, y, mean, rstd, rows, d);
  else
    forwardRows<float>(a, y, mean, rstd, rows, d);
  return {y, mean, rstd};
}

template <class T>
void backwardRows(const KernelArgs& a, at::Tensor& gx, at::Tensor& gw, at::Tensor& gb, std::int64_t rows,
                  std::int64_t d) {
  const T* dy = a.operands[0].data_ptr<T>();
  const T* x = a.operands[1].data_ptr<T>();
  const T* mean = a.operands[2].data_ptr<T>();
  const T* rstd = a.operands[3].data_ptr<T>();
  const T* w = a.operands[4].data_ptr<T>();
  T* dx = gx.data_ptr<T>();
  const int threads = at::get_num_threads();
  const std::int64_t slot = 2 * d;
  const std::int64_t declared = a.node.workspaceBytes(threads);
  TORCH_CHECK(declared == threads * slot * static_cast<std::int64_t>(sizeof(T)),
              "layer_norm_backward: the declared workspace (", declared, " B) is not one [2, d] slot per thread");
  at::Tensor ws = at::empty({threads * slot}, gx.options());
  T* partial = ws.data_ptr<T>();
  std::fill(partial, partial + threads * slot, T(0));
  at::parallel_for(0, rows, rows::rowsPerTask(d), [&](std::int64_t begin, std::int64_t end) {
    T* mine = partial + at::get_thread_num() * slot;
    for (std::int64_t row = begin; row < end; ++row)
      rows::layerNormBackward(dy + row * d, x + row * d, mean[row], rstd[row], w, dx + row * d, mine, mine + d, d);
  });
  T* dw = gw.data_ptr<T>();
  T* db = gb.data_ptr<T>();
  std::copy(partial, partial + d, dw);
  std::copy(partial + d, partial + slot, db);
  for (int t = 1; t < threads; ++t)
    for (std::int64_t c = 0; c < d; ++c) {
      dw[c] += partial[t * slot + c];
      db[c] += partial[t * slot + d + c];
    }
}

// (grad, x, mean, rstd, weight, bias) -> (grad_x, grad_weight, grad_bias).
Results hostLayerNormBackwardKernel(const KernelArgs& a) {
  at::Tensor gx = resultBuffer(a, 0), gw = resultBuffer(a, 1), gb = resultBuffer(a, 2);
  const std::int64_t d = a.operands[1].dim() ? a.operands[1].size(-1) : 0;
  if (!ownPath(a, {gx, gw, gb}, d)) return (*findPortableKernel("layer_norm_backward"))(a);
  const std::int64_t rows = a.operands[1].numel() / d;
  if (a.operands[1].scalar_type() == at::kDouble)
    backwardRows<double>(a, gx, gw, gb, rows, d);
  else
    backwardRows<float>(a, gx, gw, gb, rows, d);
  return {gx, gw, gb};
}

const KernelEntry kHostLayerNorm[] = {
    {"layer_norm", hostLayerNormKernel},
    {"layer_norm_backward", hostLayerNormBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> hostLayerNormKernels() { return kHostLayerNorm; }

}  // namespace gradc::runtime
