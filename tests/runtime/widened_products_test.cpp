// The widened products' kernel (runtime/kernels/widened_products.h) on its own: every block
// edge, operand layout, bias, accumulation and an empty sum, against the f64 product of the same
// operands; the same bits on 1 and 2 threads; exactly the blocking's scratch, and nothing
// written with less.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <limits>
#include <string>
#include <vector>

#include "ir/widened_products.h"
#include "runtime/kernels/tile_products.h"
#include "runtime/kernels/widened_products.h"

#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;

namespace {

// A [batch, rows, cols] view of `t` in one of the layouts the kernel reads.
enum class Layout { kRowMajor, kColumnMajor, kStrided };

struct Operand {
  at::Tensor storage;  // what the view's data lies in
  at::Tensor view;     // [batch, rows, cols] (batch 1 when shared)
};

Operand operandOf(const at::Tensor& values, Layout layout) {
  switch (layout) {
    case Layout::kRowMajor:
      return {values.contiguous(), values.contiguous()};
    case Layout::kColumnMajor: {
      at::Tensor s = values.transpose(1, 2).contiguous();
      return {s, s.transpose(1, 2)};
    }
    case Layout::kStrided: {  // every other row and column of a larger array
      at::Tensor s = at::zeros({values.size(0), 2 * values.size(1), 2 * values.size(2)}, values.options());
      at::Tensor v = s.slice(1, 0, c10::nullopt, 2).slice(2, 0, c10::nullopt, 2);
      v.copy_(values);
      return {s, v};
    }
  }
  return {};
}

runtime::WidenedOperand widenedOf(const at::Tensor& v, bool shared) {
  return {v.data_ptr(), shared ? 0 : v.stride(0), v.stride(1), v.stride(2)};
}

struct Shape {
  std::int64_t batch, m, k, n;
  bool sharedB;
};

// Runs one product into a fresh result (starting from `start` when accumulating) and returns it.
at::Tensor run(const Shape& s, at::ScalarType dtype, const Operand& a, const Operand& b, const at::Tensor* bias,
               const at::Tensor& start, bool accumulate) {
  at::Tensor c = start.clone();
  const ir::WidenedBlocking blocking = ir::widenedBlocking(s.batch, s.m, s.k, s.n, at::get_num_threads());
  std::vector<float> scratch(static_cast<size_t>(blocking.bytes() / 4 + 1));
  runtime::WidenedProduct p{.dtype = dtype,
                            .batch = s.batch,
                            .m = s.m,
                            .k = s.k,
                            .n = s.n,
                            .a = widenedOf(a.view, false),
                            .b = widenedOf(b.view, s.sharedB),
                            .bias = bias ? bias->data_ptr() : nullptr,
                            .c = c.data_ptr(),
                            .ldc = s.n,
                            .accumulate = accumulate};
  REQUIRE(runtime::runWidenedProduct(p, scratch.data(), blocking.bytes()));
  return c;
}

std::string describe(const Shape& s, Layout la, Layout lb, bool bias, bool accumulate) {
  const char* names[] = {"row-major", "column-major", "strided"};
  return std::to_string(s.batch) + " x [" + std::to_string(s.m) + ", " + std::to_string(s.k) + "] @ [" +
         std::to_string(s.k) + ", " + std::to_string(s.n) + "]" + (s.sharedB ? " (B shared)" : "") + ", A " +
         names[static_cast<int>(la)] + ", B " + names[static_cast<int>(lb)] + (bias ? ", bias" : "") +
         (accumulate ? ", accumulating" : "");
}

}  // namespace

TEST_CASE("widened products: one rounding of the f32 sum, every edge and layout, the same bits on 1 and 2 threads") {
  const Shape shapes[] = {
      {1, 300, 600, 520, false},  // two blocks of rows and columns, three of terms (the last short)
      {1, 256, 256, 256, false},  // exactly one block
      {3, 17, 40, 9, false},      // batched, smaller than a block
      {3, 17, 40, 9, true},       // batched, B shared
      {1, 1, 5, 1, false},        // one element
      {1, 7, 0, 5, false},        // an empty sum
  };
  for (at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    const double rounding = dtype == at::kHalf ? 1.0 / 2048 : 1.0 / 256;
    for (const Shape& s : shapes)
      for (Layout la : {Layout::kRowMajor, Layout::kColumnMajor, Layout::kStrided})
        for (Layout lb : {Layout::kRowMajor, Layout::kColumnMajor, Layout::kStrided})
          for (int variant = 0; variant < 3; ++variant) {  // plain, bias, accumulating
            const bool withBias = variant == 1, accumulate = variant == 2;
            const std::string label = describe(s, la, lb, withBias, accumulate) + (dtype == at::kHalf ? ", f16" : ", bf16");
            INFO(label);
            at::manual_seed(s.m * 7 + s.k + static_cast<int>(la) * 3 + static_cast<int>(lb));
            const at::Tensor av = at::randn({s.batch, s.m, s.k}).to(dtype);
            const at::Tensor bv = at::randn({s.sharedB ? 1 : s.batch, s.k, s.n}).to(dtype);
            const at::Tensor biasV = at::randn({s.n}).to(dtype);
            const at::Tensor start = accumulate ? at::randn({s.batch, s.m, s.n}).to(dtype)
                                                : at::full({s.batch, s.m, s.n}, 3.0, dtype);
            const Operand a = operandOf(av, la), b = operandOf(bv, lb);
            at::set_num_threads(1);
            const at::Tensor one = run(s, dtype, a, b, withBias ? &biasV : nullptr, start, accumulate);
            at::set_num_threads(2);
            const at::Tensor two = run(s, dtype, a, b, withBias ? &biasV : nullptr, start, accumulate);
            // The tile kernels sum in a fixed order (a CPU without them runs the BLAS, which may not).
            if (runtime::tiles::bestInstructionSet() != runtime::tiles::InstructionSet::kNone)
              CHECK(at::equal(one, two));
            at::Tensor ref = at::matmul(av.to(at::kDouble), bv.to(at::kDouble));
            if (withBias) ref = ref + biasV.to(at::kDouble);
            if (accumulate) ref = ref + start.to(at::kDouble);
            const double scale = std::max(ref.abs().max().item<double>(), 1.0);
            const double worst = ((one.to(at::kDouble) - ref).abs() - ref.abs() * rounding).max().item<double>();
            CHECK(worst <= scale * 1e-5);
          }
  }
  at::set_num_threads(1);
}

TEST_CASE("widened products: NaN and infinity propagate; too little scratch writes nothing") {
  at::set_num_threads(1);
  at::Tensor a = at::ones({4, 8}).to(at::kBFloat16), b = at::ones({8, 3}).to(at::kBFloat16);
  a.index_put_({1, 2}, std::numeric_limits<float>::quiet_NaN());
  a.index_put_({2, 0}, std::numeric_limits<float>::infinity());
  at::Tensor c = at::zeros({4, 3}, at::kBFloat16);
  const ir::WidenedBlocking blocking = ir::widenedBlocking(1, 4, 8, 3, 1);
  CHECK(blocking.bytes() == (4 * 8 + 8 * 3 + 4 * 3) * 4);
  std::vector<float> scratch(static_cast<size_t>(blocking.bytes() / 4));
  runtime::WidenedProduct p{.batch = 1, .m = 4, .k = 8, .n = 3,
                            .a = {a.data_ptr(), 0, 8, 1}, .b = {b.data_ptr(), 0, 3, 1}, .c = c.data_ptr(), .ldc = 3};
  CHECK_FALSE(runtime::runWidenedProduct(p, scratch.data(), blocking.bytes() - 4));
  CHECK(at::equal(c, at::zeros({4, 3}, at::kBFloat16)));
  REQUIRE(runtime::runWidenedProduct(p, scratch.data(), blocking.bytes()));
  const at::Tensor f = c.to(at::kFloat);
  CHECK(f[0][0].item<float>() == 8.0f);
  CHECK(std::isnan(f[1][1].item<float>()));
  CHECK(std::isinf(f[2][2].item<float>()));
  CHECK(f[3][0].item<float>() == 8.0f);
  p.dtype = at::kFloat;  // not a low-precision product
  CHECK_FALSE(runtime::runWidenedProduct(p, scratch.data(), blocking.bytes()));
}

TEST_CASE("widened products: the blocking") {
  const ir::WidenedBlocking big = ir::widenedBlocking(2, 600, 1000, 300, 4);
  CHECK(big.rows == 256);
  CHECK(big.columns == 256);
  CHECK(big.terms == 256);
  CHECK(big.rowBlocks == 3);
  CHECK(big.columnBlocks == 2);
  CHECK(big.blocks == 12);
  CHECK(big.tasks == 4);
  CHECK(big.bytes() == 4 * 3 * 256 * 256 * 4);
  const ir::WidenedBlocking small = ir::widenedBlocking(1, 5, 3, 2, 8);
  CHECK(small.tasks == 1);  // one block: one task, whatever the threads
  CHECK(small.bytes() == (5 * 3 + 3 * 2 + 5 * 2) * 4);
  CHECK(ir::widenedBlocking(1, 0, 3, 2, 2).bytes() == 0);
  CHECK(ir::widenedBlocking(0, 5, 3, 2, 2).bytes() == 0);
  CHECK(ir::widenedBlocking(1, 5, 0, 2, 2).bytes() == 5 * 2 * 4);  // an empty sum: the accumulator
}
