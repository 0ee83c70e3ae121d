// The host's f32 products on the tile kernels (runtime/kernels/host_products.h): large products
// (sums of up to 1,300 terms, so the 512-term blocks end part-way), every operand layout the
// linear, matmul and weight-gradient kernels pass, and a bias, against an f64 product of the
// same operands; the same bits on one and two threads; and the rule that sends large products
// to the tile kernels or the BLAS.
//
// Tolerance: each element within 1e-6 * sum_k |a_ik b_kj| of the f64 result (about 16 f32
// roundings of the sum of magnitudes: the tile kernels sum each element in order, one rounding
// per term, and the blocks add onto C in order).
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "runtime/kernels/host_products.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc::runtime;

TEST_CASE("host products: large f32 products on the tile kernels equal the f64 product, on any thread count") {
  if (tiles::bestInstructionSet() == tiles::InstructionSet::kNone) return;  // the BLAS runs them all
  struct Shape {
    std::int64_t m, k, n;
    bool transA, transB, bias;
  };
  const Shape shapes[] = {{200, 1300, 70, false, false, false}, {130, 1025, 90, true, false, false},
                          {67, 1100, 129, false, true, true},   {300, 2048, 65, true, false, false},
                          {97, 300, 250, false, true, true},    {65, 1536, 300, true, true, false}};
  const int savedThreads = at::get_num_threads();
  torch::manual_seed(21);
  for (const Shape& s : shapes) {
    CAPTURE(s.m);
    CAPTURE(s.k);
    CAPTURE(s.n);
    CAPTURE(s.transA);
    CAPTURE(s.transB);
    const at::Tensor a = s.transA ? torch::randn({s.k, s.m}).t() : torch::randn({s.m, s.k});
    const at::Tensor b = s.transB ? torch::randn({s.n, s.k}).t() : torch::randn({s.k, s.n});
    const at::Tensor bias = torch::randn({s.n});
    at::Tensor ref = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
    if (s.bias) ref += bias.to(torch::kDouble);
    const at::Tensor magnitude = torch::mm(a.abs().to(torch::kDouble), b.abs().to(torch::kDouble)) + 1;
    std::vector<at::Tensor> results;
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      at::Tensor out = torch::full({s.m, s.n}, std::nanf(""));
      REQUIRE(tileProduct(out, a, b, s.bias ? &bias : nullptr));
      const double worst = ((out.to(torch::kDouble) - ref).abs() / magnitude).max().item<double>();
      CHECK(worst <= 1e-6);
      results.push_back(out);
    }
    CHECK(torch::equal(results[0], results[1]));
  }
  at::set_num_threads(savedThreads);
}

TEST_CASE("host products: large products go to the tile kernels only where the BLAS lacks AVX-512 kernels") {
  using tiles::InstructionSet;
  // OpenBLAS held to AVX2 kernels on an AVX-512 CPU: the tile kernels.
  CHECK(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::string("Haswell"), nullptr));
  CHECK(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::string("Zen"), nullptr));
  // OpenBLAS's own AVX-512 kernels, an unknown core, another BLAS, or no AVX-512 here: the BLAS.
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::string("Cooperlake"), nullptr));
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::string("SkylakeX"), nullptr));
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::string("SomeFutureCore"), nullptr));
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::nullopt, nullptr));
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kAvx2, std::string("Haswell"), nullptr));
  // GRADC_HOST_PRODUCTS overrides, within what the CPU has.
  CHECK(largeProductsBelongOnTiles(InstructionSet::kAvx2, std::string("Cooperlake"), "tiles"));
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kNone, std::string("Haswell"), "tiles"));
  CHECK_FALSE(largeProductsBelongOnTiles(InstructionSet::kAvx512, std::string("Haswell"), "blas"));
}
