// The fused attention kernels (runtime/kernels/kernels_attention.cpp) alone against the decomposition
// they replace, run op by op through gradc's own kernels (matmul, scale, causal_mask, softmax,
// matmul, and their backward ops), on gpt-mini's shapes, alternated run by run; medians.
//   build/bench/attention_kernel [threads] [batch] [T] [fused]   (fused: time only the fused kernels)
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <vector>

#include "bench/timing.h"
#include "runtime/backends/kernel_targets.h"
#include "runtime/exec/executor.h"

namespace {

using gradc::bench::median;
using gradc::bench::seconds;

std::vector<at::Tensor> call(std::string_view op, std::vector<at::Tensor> operands, const gradc::ir::AttrMap& attrs = {}) {
  gradc::Expected<std::vector<at::Tensor>> r = gradc::runtime::callOp(op, operands, attrs);
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", std::string(op).c_str(), r.error().message.c_str());
    std::exit(1);
  }
  return *r;
}

}  // namespace

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const std::int64_t B = argc > 2 ? std::atoll(argv[2]) : 2, T = argc > 3 ? std::atoll(argv[3]) : 1024, H = 4, D = 64;
  at::set_num_threads(threads);
  at::manual_seed(0);
  const at::Tensor q = at::randn({B, H, T, D}), k = at::randn({B, H, T, D}), v = at::randn({B, H, T, D}),
                   g = at::randn({B, H, T, D});
  const gradc::ir::AttrMap attrs{{"causal", true}, {"scale", 0.125}};
  auto fused = [&] {
    std::vector<at::Tensor> f = call("attention", {q, k, v}, attrs);
    call("attention_backward", {g, q, k, v, f[0], f[1]}, attrs);
  };
  auto decomposed = [&] {
    at::Tensor s = call("matmul", {q, call("transpose", {k}, {{"dim0", std::int64_t{2}}, {"dim1", std::int64_t{3}}})[0]})[0];
    s = call("scale", {s}, {{"factor", 0.125}})[0];
    s = call("causal_mask", {s})[0];
    const at::Tensor p = call("softmax", {s}, {{"dim", std::int64_t{3}}})[0];
    call("matmul", {p, v});
    // Backward: dp = g v^T, dv = p^T g, ds = softmax_backward(dp, p), masked, scaled; dq, dk.
    const at::Tensor dp = call("matmul", {g, v.transpose(2, 3)})[0];
    call("matmul", {p.transpose(2, 3), g});
    at::Tensor ds = call("softmax_backward", {dp, p}, {{"dim", std::int64_t{3}}})[0];
    ds = call("causal_mask_backward", {ds})[0];
    ds = call("scale", {ds}, {{"factor", 0.125}})[0];
    call("matmul", {ds, k});
    call("matmul", {ds.transpose(2, 3), q});
  };
  const bool onlyFused = argc > 4 && std::string_view(argv[4]) == "fused";
  fused();
  if (!onlyFused) decomposed();
  std::vector<double> tf, td;
  for (int i = 0; i < 7; ++i) {
    tf.push_back(seconds(fused));
    if (!onlyFused) td.push_back(seconds(decomposed));
  }
  std::printf("attention forward + backward, [%lld, %lld, %lld, %lld] causal, %d thread(s): fused %.1f ms",
              static_cast<long long>(B), static_cast<long long>(H), static_cast<long long>(T), static_cast<long long>(D),
              threads, median(tf) * 1e3);
  if (onlyFused)
    std::printf("\n");
  else
    std::printf(", decomposed %.1f ms (%.2fx)\n", median(td) * 1e3, median(tf) / median(td));
}
