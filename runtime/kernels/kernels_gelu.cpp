// The host's own exact GELU, forward and backward, on f32 tensors read contiguously: one task
// per block of elements on the intra-op threads, each block in the vector loops of
// runtime/kernels/gelu_ops.h (Phi from erfc by a polynomial and a vectorisable exp: no cancellation
// in the negative tail, one pass over the data). ATen's kernels took about 0.7 ns (gelu) and
// 1.2 ns (its backward) per element on gpt-mini's [16, 128, 1024] on this project's machine;
// these take about 0.55 and 0.85 (bench/results/gpt_steptime.md). The tanh approximation, f64,
// other dtypes and strided operands take the portable kernels. Neither allocates.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <string>

#include "runtime/kernels/gelu_ops.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

constexpr std::int64_t kElementsPerTask = std::int64_t{1} << 15;

// Whether the host loops apply: the exact form, every operand and the result contiguous f32 of
// one shape.
bool onHostLoops(const KernelArgs& a, const at::Tensor& out) {
  if (ir::getString(a.node.attrs(), "approximate").value_or("none") != "none") return false;
  const auto fits = [&](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.is_contiguous() && t.sizes() == out.sizes();
  };
  return std::all_of(a.operands.begin(), a.operands.end(), fits) && fits(out);
}

Results hostGeluKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  if (!onHostLoops(a, out)) return (*findPortableKernel("gelu"))(a);
  const float* x = a.operands[0].data_ptr<float>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, out.numel(), kElementsPerTask, [&](std::int64_t begin, std::int64_t end) {
    gelu::forward(x + begin, y + begin, end - begin);
  });
  return {out};
}

// (grad, x) -> grad * gelu'(x)
Results hostGeluBackwardKernel(const KernelArgs& a) {
  at::Tensor out = resultBuffer(a);
  if (!onHostLoops(a, out)) return (*findPortableKernel("gelu_backward"))(a);
  const float* g = a.operands[0].data_ptr<float>();
  const float* x = a.operands[1].data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, out.numel(), kElementsPerTask, [&](std::int64_t begin, std::int64_t end) {
    gelu::backward(g + begin, x + begin, o + begin, end - begin);
  });
  return {out};
}

const KernelEntry kHostGelu[] = {
    {"gelu", hostGeluKernel},
    {"gelu_backward", hostGeluBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> hostGeluKernels() { return kHostGelu; }

}  // namespace gradc::runtime
