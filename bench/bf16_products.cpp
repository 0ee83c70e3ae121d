// bf16 products: gradc's kernels on each route this CPU has (widened to f32, runtime/kernels/
// widened_products.h; oneDNN's matmul, where oneDNN has a bf16 kernel) against ATen's bf16
// product (what gradc ran before it had its own on the CPUs where oneDNN has none) and against
// gradc's own f32 product of the same shapes; alternated run by run, medians of 31.
//   build/bench/bf16_products [threads]
// Shapes: gpt-mini's at batch 16 (2,048 rows, d 256, d_ff 1024): the qkv, fc1 and fc2 linears,
// fc1's weight gradient, and attention's q @ k^T ([16, 4, 128, 64] @ [16, 4, 64, 128]).
// Each gradc call includes allocating its result and its declared temporaries (runtime::callOp).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "onednn/gemm.h"
#include "runtime/backends/kernel_targets.h"
#include "runtime/exec/executor.h"
#include "runtime/kernels/blas_kernels.h"
#include "runtime/kernels/tile_products.h"

namespace {

using gradc::bench::median;
using gradc::bench::seconds;
namespace onednn = gradc::onednn;

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  gradc::runtime::registerKernelTargets();
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  at::set_num_threads(threads);
  at::manual_seed(0);
  const std::optional<std::string> blas = gradc::runtime::openblasCoreName();
  std::printf("%s; %d thread(s); oneDNN bf16 kernel: %s (bf16 instructions: %s); default route: %s; tile kernels: %s; "
              "OpenBLAS core: %s\n",
              cpuModel().c_str(), threads, onednn::available() ? "yes" : "no", onednn::native() ? "yes" : "no",
              onednn::nameOf(onednn::bf16Route()),
              gradc::runtime::tiles::nameOf(gradc::runtime::tiles::bestInstructionSet()),
              blas ? blas->c_str() : "not OpenBLAS");

  struct Case {
    std::string name, op;
    std::vector<at::Tensor> operands;  // f32; each system gets its own dtype's copy
    std::function<at::Tensor(const std::vector<at::Tensor>&)> aten;
  };
  const at::Tensor x = at::randn({2048, 256}), h = at::randn({2048, 1024});
  const at::Tensor wqkv = at::randn({768, 256}), bqkv = at::randn({768});
  const at::Tensor w1 = at::randn({1024, 256}), b1 = at::randn({1024});
  const at::Tensor w2 = at::randn({256, 1024}), b2 = at::randn({256});
  const at::Tensor g1 = at::randn({2048, 1024});
  const at::Tensor q = at::randn({16, 4, 128, 64}), kt = at::randn({16, 4, 64, 128});
  const auto linear = [](const std::vector<at::Tensor>& o) { return at::addmm(o[2], o[0], o[1].t()); };
  const std::vector<Case> cases{
      {"qkv: linear 2048x256 -> 768 (+bias)", "linear", {x, wqkv, bqkv}, linear},
      {"fc1: linear 2048x256 -> 1024 (+bias)", "linear", {x, w1, b1}, linear},
      {"fc2: linear 2048x1024 -> 256 (+bias)", "linear", {h, w2, b2}, linear},
      {"fc1 weight grad 1024x2048 @ 2048x256", "linear_weight_grad", {g1, x},
       [](const std::vector<at::Tensor>& o) { return at::mm(o[0].t(), o[1]); }},
      {"q @ k^T [16,4,128,64] @ [16,4,64,128]", "matmul", {q, kt},
       [](const std::vector<at::Tensor>& o) { return at::matmul(o[0], o[1]); }},
  };
  std::vector<onednn::Bf16Route> routes{onednn::Bf16Route::kWidened};
  if (onednn::available()) routes.push_back(onednn::Bf16Route::kOneDnn);

  std::printf("| product | f32 (ms) |");
  for (onednn::Bf16Route r : routes) std::printf(" bf16 %s (ms) |", onednn::nameOf(r));
  std::printf(" ATen bf16 (ms) |");
  for (onednn::Bf16Route r : routes) std::printf(" %s / f32 |", onednn::nameOf(r));
  std::printf(" ATen bf16 / f32 |\n|---|---|");
  for (size_t i = 0; i < 2 * routes.size() + 2; ++i) std::printf("---|");
  std::printf("\n");
  for (const Case& c : cases) {
    std::vector<at::Tensor> low;
    for (const at::Tensor& t : c.operands) low.push_back(t.to(at::kBFloat16));
    std::vector<double> f32, aten;
    std::vector<std::vector<double>> ours(routes.size());
    for (int rep = 0; rep < 31; ++rep) {
      f32.push_back(seconds([&] { (void)gradc::runtime::callOp(c.op, c.operands); }));
      for (size_t r = 0; r < routes.size(); ++r) {
        onednn::imposeBf16Route(routes[r]);
        ours[r].push_back(seconds([&] { (void)gradc::runtime::callOp(c.op, low); }));
      }
      onednn::imposeBf16Route(std::nullopt);
      aten.push_back(seconds([&] { (void)c.aten(low); }));
    }
    const double base = median(f32);
    std::printf("| %s | %.3f |", c.name.c_str(), base * 1e3);
    for (const auto& v : ours) std::printf(" %.3f |", median(v) * 1e3);
    std::printf(" %.3f |", median(aten) * 1e3);
    for (const auto& v : ours) std::printf(" %.2f |", median(v) / base);
    std::printf(" %.2f |\n", median(aten) / base);
  }
}
