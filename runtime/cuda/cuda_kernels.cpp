#include "runtime/cuda/cuda_kernels.h"

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <optional>
#include <string>

#include "runtime/counter_rng.h"
#include "runtime/cuda/dropout_kernel.h"
#include "runtime/cuda/softmax_backward_kernel.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

std::optional<cuda::Element> elementOf(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return cuda::Element::f32;
    case at::kDouble: return cuda::Element::f64;
    case at::kHalf: return cuda::Element::f16;
    case at::kBFloat16: return cuda::Element::bf16;
    default: return std::nullopt;
  }
}

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

const KernelEntry kCuda[] = {
    {"dropout", dropoutKernel},
    {"softmax_backward", softmaxBackwardKernel},
};

}  // namespace

std::span<const KernelEntry> cudaKernels() { return kCuda; }

}  // namespace gradc::runtime
