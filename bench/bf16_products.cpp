// bf16 products: gradc's kernels (oneDNN's matmul with the planned scratchpad,
// runtime/kernels/onednn_products.h) against ATen's bf16 product (oneDNN through ideep, which allocates
// the scratchpad per call) on the same operands, alternated run by run; medians.
//   build/bench/bf16_products [threads]
// Shapes: gpt-mini at batch 16 (4096 rows, d 256, vocab 65 padded, d_ff 1024) and the
// attention products ([16, 4, 256, 64] @ [16, 4, 64, 256]).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "onednn/gemm.h"
#include "runtime/exec/executor.h"

namespace {

using gradc::bench::median;
using gradc::bench::seconds;

at::Tensor bf16(std::vector<std::int64_t> shape) { return at::randn(shape).to(at::kBFloat16); }

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  at::set_num_threads(threads);
  at::manual_seed(0);
  std::printf("oneDNN bf16 kernel here: %s; %d thread(s)\n", gradc::onednn::available() ? "yes" : "no", threads);
  struct Case {
    std::string name, op;
    std::vector<at::Tensor> operands;
    std::function<at::Tensor()> aten;
  };
  const at::Tensor x = bf16({4096, 256}), w = bf16({1024, 256}), b = bf16({1024}), g = bf16({4096, 1024});
  const at::Tensor q = bf16({16, 4, 256, 64}), k = bf16({16, 4, 64, 256});
  std::vector<Case> cases{
      {"linear 4096x256 -> 1024 (+bias)", "linear", {x, w, b}, [&] { return at::addmm(b, x, w.t()); }},
      {"linear_weight_grad 1024x4096 @ 4096x256", "linear_weight_grad", {g, x}, [&] { return at::mm(g.t(), x); }},
      {"matmul [16,4,256,64] @ [16,4,64,256]", "matmul", {q, k}, [&] { return at::matmul(q, k); }},
  };
  std::printf("| product | gradc (ms) | ATen (ms) | gradc / ATen |\n|---|---|---|---|\n");
  for (const Case& c : cases) {
    std::vector<double> ours, theirs;
    for (int rep = 0; rep < 31; ++rep) {
      ours.push_back(seconds([&] { (void)gradc::runtime::callOp(c.op, c.operands); }));
      theirs.push_back(seconds([&] { (void)c.aten(); }));
    }
    const double o = median(ours), t = median(theirs);
    std::printf("| %s | %.3f | %.3f | %.2f |\n", c.name.c_str(), o * 1e3, t * 1e3, o / t);
  }
}
