// The host's own softmax and log-softmax, forward and backward, over the last axis of f32 and
// f64 tensors read contiguously: one task per block of rows on the intra-op threads, each row in
// the vector loops of runtime/kernels/row_ops.h (f32 exps by a vectorisable polynomial, where
// ATen's AVX2 kernel calls SLEEF's). ATen's kernels took 0.8 us (softmax) and 1.0 us (its
// backward) per thousand elements of a [16, 4, 128, 128] tensor on this project's machine, where
// an add takes 0.08. Other axes, dtypes and strided operands take the portable kernels. None
// allocates.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>

#include "runtime/kernels/kernels.h"
#include "runtime/kernels/row_ops.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// The rows: the last axis when the op normalises over it and every tensor is contiguous f32
// (or f64) of one shape; 0 otherwise.
std::int64_t rowLength(const KernelArgs& a, const at::Tensor& out) {
  const at::Tensor& x = a.operands.back();
  if (x.dim() == 0 || axisAttr(a.node, "dim", x.dim()) != x.dim() - 1 || x.size(-1) == 0) return 0;
  const at::ScalarType t = x.scalar_type();
  if (t != at::kFloat && t != at::kDouble) return 0;
  const auto fits = [&](const at::Tensor& v) { return v.scalar_type() == t && v.is_contiguous() && v.sizes() == x.sizes(); };
  return std::all_of(a.operands.begin(), a.operands.end(), fits) && fits(out) ? x.size(-1) : 0;
}

// out = f(row) for each row of the forward's operand.
template <class T, void (*Row)(const T*, T*, std::int64_t)>
void forwardRows(const at::Tensor& x, at::Tensor& out, std::int64_t d) {
  const T* in = x.data_ptr<T>();
  T* y = out.data_ptr<T>();
  at::parallel_for(0, x.numel() / d, rows::rowsPerTask(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) Row(in + r * d, y + r * d, d);
  });
}

// out = f(g row, y row) for each row of the backward's operands (grad, y).
template <class T, void (*Row)(const T*, const T*, T*, std::int64_t)>
void backwardRows(const at::Tensor& g, const at::Tensor& y, at::Tensor& out, std::int64_t d) {
  const T* gd = g.data_ptr<T>();
  const T* yd = y.data_ptr<T>();
  T* o = out.data_ptr<T>();
  at::parallel_for(0, y.numel() / d, rows::rowsPerTask(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) Row(gd + r * d, yd + r * d, o + r * d, d);
  });
}

template <void (*RowF)(const float*, float*, std::int64_t), void (*RowD)(const double*, double*, std::int64_t)>
Results forwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  const std::int64_t d = rowLength(a, out);
  if (d == 0) return (*findPortableKernel(a.node.op().name))(a);
  if (out.scalar_type() == at::kDouble)
    forwardRows<double, RowD>(a.operands[0], out, d);
  else
    forwardRows<float, RowF>(a.operands[0], out, d);
  return {out};
}

template <void (*RowF)(const float*, const float*, float*, std::int64_t),
          void (*RowD)(const double*, const double*, double*, std::int64_t)>
Results backwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  const std::int64_t d = rowLength(a, out);
  if (d == 0) return (*findPortableKernel(a.node.op().name))(a);
  if (out.scalar_type() == at::kDouble)
    backwardRows<double, RowD>(a.operands[0], a.operands[1], out, d);
  else
    backwardRows<float, RowF>(a.operands[0], a.operands[1], out, d);
  return {out};
}

const KernelEntry kHostSoftmax[] = {
    {"softmax", forwardKernel<rows::softmax, rows::softmax>},
    {"log_softmax", forwardKernel<rows::logSoftmax, rows::logSoftmax>},
    {"softmax_backward", backwardKernel<rows::softmaxBackward, rows::softmaxBackward>},
    {"log_softmax_backward", backwardKernel<rows::logSoftmaxBackward, rows::logSoftmaxBackward>},
};

}  // namespace

std::span<const KernelEntry> hostSoftmaxKernels() { return kHostSoftmax; }

}  // namespace gradc::runtime
