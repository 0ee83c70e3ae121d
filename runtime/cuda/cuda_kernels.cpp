#include "runtime/cuda/cuda_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <array>
#include <optional>
#include <string>

#include "runtime/cuda/aten_element.h"
#include "runtime/cuda/cuda_attention.h"
#include "runtime/cuda/dropout_kernel.h"
#include "runtime/cuda/ptx_kernels.h"
#include "runtime/cuda/softmax_backward_kernel.h"
#include "runtime/core/counter_rng.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

using cuda::elementOf;

cudaStream_t streamOf(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

// Zero with probability p, scale the rest by 1 / (1 - p): the host kernel's mask
// (kernel_detail::dropoutMask), element i at stream position offset + i.
Results dropoutKernel(const KernelArgs& a) {
  const at::Tensor x = a.operands[0].contiguous();
  at::Tensor y = resultBuffer(a);
  const DropoutMask mask = dropoutMask(a);
  if (mask.p == 0.0) return {y.copy_(x)};
  std::optional<cuda::Element> element = elementOf(x.scalar_type());
  TORCH_CHECK(element, "dropout on ", x.device(), ": no kernel for ", x.scalar_type());
  TORCH_CHECK(y.is_contiguous() && x.numel() == y.numel(), "dropout on ", x.device(),
              ": operand and result must be contiguous and of one size");
  c10::cuda::CUDAGuard guard(x.device());
  const PhiloxKey key = philoxKey(mask.rng);
  cuda::DropoutLaunch l;
  l.element = *element;
  l.x = x.data_ptr();
  l.y = y.data_ptr();
  l.n = x.numel();
  l.offset = static_cast<std::uint64_t>(mask.offset);
  l.step = static_cast<std::uint64_t>(mask.rng.step);
  l.k0 = key[0];
  l.k1 = key[1];
  l.threshold = mask.threshold;
  l.scale = mask.scale;
  l.stream = streamOf(x);
  if (const char* e = cuda::launchDropout(l)) TORCH_CHECK(false, "dropout on ", x.device(), ": ", e);
  return {y};
}

// (grad, y = softmax(x)): y * (grad - sum(grad * y, dim)), into the planned result only.
Results softmaxBackwardKernel(const KernelArgs& a) {
  const at::Tensor grad = a.operands[0].contiguous(), y = a.operands[1].contiguous();
  at::Tensor out = resultBuffer(a);
  const std::int64_t dim = axisAttr(a.node, "dim", y.dim());
  std::optional<cuda::Element> element = elementOf(y.scalar_type());
  TORCH_CHECK(element, "softmax backward on ", y.device(), ": no kernel for ", y.scalar_type());
  TORCH_CHECK(out.is_contiguous() && grad.sizes() == y.sizes() && out.sizes() == y.sizes() &&
                  grad.scalar_type() == y.scalar_type() && out.scalar_type() == y.scalar_type(),
              "softmax backward on ", y.device(), ": operands and result must be of one shape and dtype");
  c10::cuda::CUDAGuard guard(y.device());
  cuda::SoftmaxBackwardLaunch l;
  l.element = *element;
  l.grad = grad.data_ptr();
  l.y = y.data_ptr();
  l.out = out.data_ptr();
  l.outer = 1;
  l.inner = 1;
  for (std::int64_t d = 0; d < dim; ++d) l.outer *= y.size(d);
  for (std::int64_t d = dim + 1; d < y.dim(); ++d) l.inner *= y.size(d);
  l.size = y.size(dim);
  l.stream = streamOf(y);
  if (const char* e = cuda::launchSoftmaxBackward(l)) TORCH_CHECK(false, "softmax backward on ", y.device(), ": ", e);
  return {out};
}

// A fused region: its PTX kernel (runtime/cuda/ptx_kernels.h) over the result's elements on the
// rank's stream. It writes only the node's results, into their planned buffers, and allocates
// nothing (workspace 0, as on the host). Operands are read through the strides the node names
// (fusedBuffers checks them, as on the host).
Results fusedKernel(const KernelArgs& a) {
  TORCH_CHECK(a.generated, "fused node of ", a.node.specName(),
              ": no PTX is loaded for it (run the compiled artifact, which carries its PTX)");
  Results results;
  std::vector<void*> pointers = fusedBuffers(a, results);
  // The kernel's arguments after the buffers: the element count, the run's RNG inputs, then its
  // dropout steps' streams (as the unfused dropout kernel draws).
  std::vector<std::int64_t> values{a.node.result()->type().numel(), static_cast<std::int64_t>(a.ctx.seed), a.ctx.step};
  values.insert(values.end(), a.generated->streams.begin(), a.generated->streams.end());
  std::vector<void*> params;
  for (void*& p : pointers) params.push_back(&p);
  for (std::int64_t& v : values) params.push_back(&v);
  c10::cuda::CUDAGuard guard(results.front().device());
  if (Status s = launchPtxKernel(a.generated->fn, values.front(), params.data(), streamOf(results.front())); !s)
    TORCH_CHECK(false, "fused node of ", a.node.specName(), " on ", results.front().device(), ": ", s.message());
  return results;
}

// (param, grad, m, v, lr, step, grad_scale): the one-pass update (adamw_step {fused = true}) as
// the artifact's PTX kernel when it carries one (codegen/optimizer_kernels.h), in place on the
// four buffers; otherwise the portable update, op by op. The nine scalars are the step's, read on
// the host once per step (runtime/core/step_scalars.h), and passed by value.
Results adamwStepKernel(const KernelArgs& a) {
  if (!a.generated) return (*findPortableKernel("adamw_step"))(a);
  const at::Tensor& param = a.operands[0];
  std::vector<void*> pointers;
  for (size_t i = 0; i < 4; ++i) {
    const at::Tensor& t = a.operands[i];
    TORCH_CHECK(t.is_contiguous() && t.scalar_type() == param.scalar_type() && t.numel() == param.numel() &&
                    t.device() == param.device(),
                "adamw_step of ", a.node.specName(), ": param, grad, m and v must be contiguous, of one dtype, size "
                "and device");
    pointers.push_back(t.data_ptr());
  }
  std::int64_t n = a.operands[0].numel();
  std::array<double, 9> scalars = adamwOnePassScalars(a);
  std::vector<void*> params;
  for (void*& p : pointers) params.push_back(&p);
  params.push_back(&n);
  for (double& v : scalars) params.push_back(&v);
  c10::cuda::CUDAGuard guard(a.operands[0].device());
  if (Status s = launchPtxKernel(a.generated->fn, n, params.data(), streamOf(a.operands[0])); !s)
    TORCH_CHECK(false, "adamw_step of ", a.node.specName(), " on ", a.operands[0].device(), ": ", s.message());
  return {};
}

const KernelEntry kCuda[] = {
    {"adamw_step", adamwStepKernel},
    {"dropout", dropoutKernel},
    {"fused", fusedKernel},
    {"softmax_backward", softmaxBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> cudaKernels() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> entries(std::begin(kCuda), std::end(kCuda));
    for (auto part : {cudaAttentionKernels(), layerNormF32StatisticsKernels(), layerNormBackwardF32StatisticsKernels()})
      entries.insert(entries.end(), part.begin(), part.end());
    return entries;
  }();
  return all;
}

}  // namespace gradc::runtime
