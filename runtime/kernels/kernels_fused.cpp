// The kernel of `fused` nodes: the region's generated code (runtime/kernels/generated_kernels.h), run
// over the node's elements in parallel chunks on the intra-op thread pool. It writes only the
// node's results (into their planned buffers) and allocates nothing: its workspace is 0, as the
// op table declares. Operands are read in place through the strides the node names (its
// `strides` attribute, contiguous without it: ir/fused_body.h), which the code was generated
// for; an operand whose strides differ (a planner whose stride model disagrees with ATen's)
// is an error, never a wrong read.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <variant>

#include "runtime/kernels/generated_kernels.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime {
namespace {
using Results = std::vector<at::Tensor>;
using kernel_detail::resultBuffer;

// Elements per parallel task: large enough that scheduling costs nothing next to the work.
constexpr std::int64_t kFusedGrain = 1 << 15;

Results fusedKernel(const KernelArgs& a) {
  TORCH_CHECK(a.generated, "fused node of ", a.node.specName(),
              ": no generated kernels are loaded (run the compiled artifact, which carries them)");
  const auto fn = reinterpret_cast<FusedKernelFn>(a.generated->fn);
  Results results;
  const std::vector<void*> buffers = kernel_detail::fusedBuffers(a, results);
  // The run's RNG inputs, then its dropout steps' streams (as the unfused dropout kernel draws).
  std::vector<std::int64_t> scalars{static_cast<std::int64_t>(a.ctx.seed), a.ctx.step};
  scalars.insert(scalars.end(), a.generated->streams.begin(), a.generated->streams.end());
  const std::int64_t n = a.node.result()->type().numel();
  at::parallel_for(0, n, kFusedGrain,
                   [&](std::int64_t begin, std::int64_t end) { fn(buffers.data(), begin, end, scalars.data()); });
  return results;
}

const KernelEntry kEntries[] = {{"fused", fusedKernel}};
}  // namespace

std::vector<void*> kernel_detail::fusedBuffers(const KernelArgs& a, std::vector<at::Tensor>& results) {
  // The node's `strides` attribute (the verifier checked its length against the operands'
  // ranks), read in place: this runs at every step.
  const auto named = a.node.attrs().find("strides");
  const std::vector<std::int64_t>* strides =
      named != a.node.attrs().end() ? std::get_if<std::vector<std::int64_t>>(&named->second) : nullptr;
  std::vector<void*> buffers;
  std::int64_t at = 0;
  for (size_t k = 0; k < a.operands.size(); ++k) {
    const at::Tensor& t = a.operands[k];
    if (strides == nullptr) {
      TORCH_CHECK(t.is_contiguous(), "fused node of ", a.node.specName(), ": operand is not contiguous");
    } else {
      TORCH_CHECK(at + t.dim() <= static_cast<std::int64_t>(strides->size()), "fused node of ", a.node.specName(),
                  ": its strides do not cover operand ", k);
      const c10::IntArrayRef expected(strides->data() + at, static_cast<size_t>(t.dim()));
      at += t.dim();
      bool same = true;
      for (std::int64_t d = 0; same && d < t.dim(); ++d) same = t.size(d) == 1 || t.stride(d) == expected[d];
      TORCH_CHECK(same, "fused node of ", a.node.specName(), ": operand ", k, " has strides ", t.strides(),
                  " where its kernel was generated for ", expected);
    }
    buffers.push_back(t.data_ptr());
  }
  for (size_t i = 0; i < a.node.numResults(); ++i) {
    results.push_back(resultBuffer(a, i));
    buffers.push_back(results.back().data_ptr());
  }
  return buffers;
}

std::span<const KernelEntry> hostFusedKernels() { return kEntries; }

}  // namespace gradc::runtime
