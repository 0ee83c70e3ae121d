// f32 products: the host's tile kernels (runtime/kernels/host_products.h, through hostProduct,
// as the linear, matmul and linear_weight_grad kernels call them) against ATen's mm on the same
// operands (OpenBLAS, as the kernels called before), alternated call by call; medians of
// GFLOP/s, and the largest difference between the two results.
//   build/bench/host_products [threads]
// Shapes: lstm-lm's step at batch 8 and 16 (x [b, 256] @ W^T [256, 1024], dgates [b, 1024] @
// W [1024, 256], dgates^T [1024, b] @ h [b, 256]); mlp's layers at batch 64; the fused
// attention's tiles ([16, 64] @ K^T [64, 128], [64, 128] @ V [128, 64]); gpt-mini's MLP
// products at batch 16 (2,048 rows), which take the tile kernels only where large products do
// (host_products.h: an OpenBLAS without AVX-512 kernels on an AVX-512 CPU).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "runtime/backends/kernel_targets.h"
#include "runtime/kernels/host_products.h"
#include "runtime/kernels/tile_products.h"

namespace {

using gradc::bench::median;
using gradc::bench::seconds;

struct Shape {
  std::string what;
  std::int64_t m, k, n;
  bool transA, transB;  // a is stored [k, m] / b is stored [n, k]
};

}  // namespace

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  at::set_num_threads(threads);
  at::manual_seed(0);
  const std::vector<Shape> shapes{
      {"lstm-lm b8: h @ W_hh^T", 8, 256, 1024, false, true},
      {"lstm-lm b8: dgates @ W_hh", 8, 1024, 256, false, false},
      {"lstm-lm b8: dgates^T @ h", 1024, 8, 256, true, false},
      {"lstm-lm b16: h @ W_hh^T", 16, 256, 1024, false, true},
      {"lstm-lm b16: dgates @ W_hh", 16, 1024, 256, false, false},
      {"lstm-lm b16: dgates^T @ h", 1024, 16, 256, true, false},
      {"mlp b64: x @ W^T", 64, 256, 256, false, true},
      {"mlp b64: dy^T @ x", 256, 64, 256, true, false},
      {"attention: q @ k^T (16 rows)", 16, 64, 128, false, true},
      {"attention: p @ v", 64, 128, 64, false, false},
      {"gpt-mini b16: x @ W_fc^T", 2048, 256, 1024, false, true},
      {"gpt-mini b16: h @ W_proj^T", 2048, 1024, 256, false, true},
      {"gpt-mini b16: dh @ W_fc", 2048, 1024, 256, false, false},
      {"gpt-mini b16: dh^T @ x", 1024, 2048, 256, true, false},
  };
  std::printf("| product | m x k x n | tile kernels GFLOP/s | ATen mm (BLAS) GFLOP/s | ratio | max abs diff |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const at::Tensor a = s.transA ? at::randn({s.k, s.m}).t() : at::randn({s.m, s.k});
    const at::Tensor b = s.transB ? at::randn({s.n, s.k}).t() : at::randn({s.k, s.n});
    at::Tensor ours = at::empty({s.m, s.n}), theirs = at::empty({s.m, s.n});
    const double flops = 2.0 * static_cast<double>(s.m * s.k * s.n);
    const int calls = static_cast<int>(std::max(1.0, 2e8 / flops));
    if (!gradc::runtime::hostProduct(ours, a, b)) {
      std::printf("| %s | (the BLAS's: no tile kernel on this CPU, or a large product kept on the BLAS) |\n",
                  s.what.c_str());
      continue;
    }
    std::vector<double> tOurs, tTheirs;
    for (int rep = 0; rep < 9; ++rep) {
      tOurs.push_back(seconds([&] {
        for (int c = 0; c < calls; ++c) gradc::runtime::hostProduct(ours, a, b);
      }));
      tTheirs.push_back(seconds([&] {
        for (int c = 0; c < calls; ++c) at::mm_out(theirs, a, b);
      }));
    }
    const double gOurs = flops * calls / median(tOurs) / 1e9, gTheirs = flops * calls / median(tTheirs) / 1e9;
    const double diff = (ours - theirs).abs().max().item<double>();
    std::printf("| %s | %lld x %lld x %lld | %.1f | %.1f | %.2fx | %.1e |\n", s.what.c_str(),
                static_cast<long long>(s.m), static_cast<long long>(s.k), static_cast<long long>(s.n), gOurs,
                gTheirs, gOurs / gTheirs, diff);
  }
  std::printf("\n%d intra-op thread(s); tile kernels: %s; large products on them: %s\n", threads,
              gradc::runtime::tiles::nameOf(gradc::runtime::tiles::bestInstructionSet()),
              gradc::runtime::largeProductsOnTiles() ? "yes" : "no (the BLAS)");
}
