// The tiled kernels' small products (runtime/kernels/tile_products.h) against a double-precision
// reference, on every instruction set this CPU runs: every combination of transposed operands,
// accumulation, leading dimensions wider than the matrices, and sizes on both sides of each
// register block's edges (rows 6 and 4, columns 64 and 16, the stack panels' 128 rows and 64
// columns). Each element within 4 f32 ulps of sum |a b| (rounding of a k-term sum); nothing
// outside C's [m, n] written; the same operands give the same bits.
#include <cstdlib>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/kernels/tile_products.h"

#undef CHECK
#include <doctest/doctest.h>

using namespace gradc::runtime::tiles;

namespace {

struct Shape {
  std::int64_t m, n, k;
};

void checkOne(InstructionSet isa, bool transA, bool transB, bool accumulate, const Shape& s, std::mt19937& gen) {
  std::normal_distribution<float> normal;
  const std::int64_t aRows = transA ? s.k : s.m, aCols = transA ? s.m : s.k;
  const std::int64_t bRows = transB ? s.n : s.k, bCols = transB ? s.k : s.n;
  const std::int64_t lda = aCols + 3, ldb = bCols + 1, ldc = s.n + 5;
  std::vector<float> A(aRows * lda), B(bRows * ldb), C(std::max<std::int64_t>(s.m, 1) * ldc);
  for (float& x : A) x = normal(gen);
  for (float& x : B) x = normal(gen);
  for (float& x : C) x = normal(gen);
  const std::vector<float> before = C;
  const float alpha = 0.75f;
  REQUIRE(productOn(isa, transA, transB, s.m, s.n, s.k, alpha, A.data(), lda, B.data(), ldb, accumulate, C.data(),
                    ldc));

  int bad = 0;
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < ldc; ++j) {
      const float got = C[i * ldc + j];
      if (j >= s.n) {  // beyond the row's n columns: untouched
        bad += got != before[i * ldc + j];
        continue;
      }
      double sum = 0.0, magnitude = 0.0;
      for (std::int64_t p = 0; p < s.k; ++p) {
        const double a = transA ? A[p * lda + i] : A[i * lda + p];
        const double b = transB ? B[j * ldb + p] : B[p * ldb + j];
        sum += a * b;
        magnitude += std::fabs(a * b);
      }
      double expected = alpha * sum;
      if (accumulate) expected += before[i * ldc + j];
      const double bound = 4.0 * 1.2e-7 * (alpha * magnitude + (accumulate ? std::fabs(before[i * ldc + j]) : 0.0)) +
                           1e-30;
      bad += !(std::fabs(got - expected) <= bound);
    }
  CHECK_MESSAGE(bad == 0, nameOf(isa) << " transA " << transA << " transB " << transB << " accumulate "
                                      << accumulate << " m " << s.m << " n " << s.n << " k " << s.k << ": " << bad
                                      << " elements wrong");

  // The same operands again: the same bits.
  std::vector<float> again = before;
  productOn(isa, transA, transB, s.m, s.n, s.k, alpha, A.data(), lda, B.data(), ldb, accumulate, again.data(), ldc);
  CHECK(again == C);
}

}  // namespace

TEST_CASE("tile products: every kernel this CPU runs equals the f64 reference within the rounding of its sum") {
  std::vector<InstructionSet> sets;
  for (InstructionSet isa : {InstructionSet::kAvx2, InstructionSet::kAvx512}) {
    float c = 0.0f;
    const float one = 1.0f;
    if (productOn(isa, false, false, 1, 1, 1, 1.0f, &one, 1, &one, 1, false, &c, 1)) sets.push_back(isa);
  }
  if (bestInstructionSet() == InstructionSet::kNone) {
    float c = 0.0f;
    const float one = 1.0f;
    CHECK_FALSE(product(false, false, 1, 1, 1, 1.0f, &one, 1, &one, 1, false, &c, 1));
    MESSAGE("skipped: no vector kernel on this CPU (the callers use their BLAS)");
    return;
  }
  if (std::getenv("GRADC_TILE_KERNELS") == nullptr) CHECK(sets.back() == bestInstructionSet());  // not capped
  const std::vector<Shape> shapes{{1, 1, 1},    {6, 64, 64},   {64, 64, 64}, {64, 128, 64}, {7, 65, 3},
                                  {5, 17, 129}, {13, 130, 33}, {4, 16, 257}, {37, 45, 29},  {3, 8, 0},
                                  {12, 200, 1}, {1, 15, 300}};
  std::mt19937 gen(3);
  for (InstructionSet isa : sets)
    for (bool transA : {false, true})
      for (bool transB : {false, true})
        for (bool accumulate : {false, true})
          for (const Shape& s : shapes) checkOne(isa, transA, transB, accumulate, s, gen);
  MESSAGE("kernels checked: " << sets.size() << ", best " << std::string(nameOf(bestInstructionSet())));
}
