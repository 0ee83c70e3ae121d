// bf16 and f16 matrix products on the host (runtime/kernels/low_precision_products.h), on every
// route this CPU has: widened to f32 (any CPU) and oneDNN's matmul (where oneDNN has a bf16
// kernel: AVX-512). On each, the kernel allocates exactly its result, the op table's declared
// workspace and the copies the planner's storage model counts, and its values are one rounding
// of the f32 accumulation of the same operands. A CPU whose kernel allocates other than its
// declaration fails here, whichever route it takes by default.
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "ir/op_table.h"
#include "onednn/gemm.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

#undef CHECK
#include <doctest/doctest.h>

#include "tests/runtime/op_allocation.h"  // after doctest

using namespace gradc;

namespace {

// Imposes a bf16 route for one scope.
class RouteScope {
 public:
  explicit RouteScope(onednn::Bf16Route route) { REQUIRE(onednn::imposeBf16Route(route)); }
  ~RouteScope() { onednn::imposeBf16Route(std::nullopt); }
  RouteScope(const RouteScope&) = delete;
  RouteScope& operator=(const RouteScope&) = delete;
};

std::vector<onednn::Bf16Route> routesHere() {
  std::vector<onednn::Bf16Route> routes{onednn::Bf16Route::kWidened};
  if (onednn::available()) routes.push_back(onednn::Bf16Route::kOneDnn);
  return routes;
}

at::Tensor lowp(std::vector<std::int64_t> shape, int seed, at::ScalarType dtype) {
  at::manual_seed(seed);
  return at::randn(shape).to(dtype);
}

struct Case {
  std::string name, op;
  std::vector<at::Tensor> operands;
  at::Tensor reference;        // the f32 product of the low-precision operands
  std::int64_t copyBytes = 0;  // the operand the kernel copies first (the planner's hidden copy)
};

// Runs the op, checks its allocation (result + declared workspace + its copy, exactly) and its
// value: within one rounding (half an ulp: 2^-8 of the value in bf16, 2^-11 in f16) of the f32
// product, plus the f32 summation order's error (1e-5 of the largest value).
void check(const Case& c) {
  INFO(c.name);
  const testing::OpRun r = testing::runOp(c.op, c.operands);
  const at::Tensor& out = r.result;
  CHECK(r.declared > 0);
  CHECK(r.allocated == static_cast<std::int64_t>(out.nbytes()) + r.declared + c.copyBytes);
  const double rounding = out.scalar_type() == at::kHalf ? 1.0 / 2048 : 1.0 / 256;
  const at::Tensor ref = c.reference.to(at::kDouble), ours = out.to(at::kDouble);
  const double scale = ref.abs().max().item<double>();
  const double worst = ((ours - ref).abs() - ref.abs() * rounding).max().item<double>();
  CHECK(worst <= scale * 1e-5);
}

void checkAllLayouts(at::ScalarType dtype) {
  const auto t = [&](std::vector<std::int64_t> shape, int seed) { return lowp(std::move(shape), seed, dtype); };
  const auto f = [](const at::Tensor& x) { return x.to(at::kFloat); };
  const std::int64_t element = 2;  // bytes of a bf16 or f16 value
  const at::Tensor x = t({3, 7, 96}, 1), w = t({40, 96}, 2), bias = t({40}, 3);
  check({"linear", "linear", {x, w}, at::matmul(f(x), f(w).t())});
  check({"linear with bias", "linear", {x, w, bias}, at::matmul(f(x), f(w).t()) + f(bias)});
  check({"linear, strided input (copied)", "linear", {x.transpose(0, 1), w},
         at::matmul(f(x).transpose(0, 1), f(w).t()), x.numel() * element});
  const at::Tensor g = t({3, 7, 40}, 4);
  check({"linear_weight_grad", "linear_weight_grad", {g, x},
         at::mm(f(g).reshape({-1, 40}).t(), f(x).reshape({-1, 96}))});

  const at::Tensor a = t({33, 64}, 5), b = t({64, 17}, 6);
  check({"matmul 2-D", "matmul", {a, b}, at::mm(f(a), f(b))});
  check({"matmul 2-D, both transposed views", "matmul", {b.t(), a.t()}, at::mm(f(b).t(), f(a).t())});
  const at::Tensor a3 = t({4, 33, 64}, 7);
  check({"matmul folded [4, 33, 64] @ [64, 17]", "matmul", {a3, b}, at::matmul(f(a3), f(b))});
  const at::Tensor a3t = t({4, 64, 33}, 8).transpose(1, 2);
  check({"matmul transposed 3-D @ 2-D (batched, B shared)", "matmul", {a3t, b}, at::matmul(f(a3t), f(b))});
  // Attention's shapes: [B, H, T, D] @ [B, H, D, T] and a key shared over heads.
  const at::Tensor q = t({2, 3, 16, 8}, 9), k = t({2, 3, 16, 8}, 10), kShared = t({2, 1, 8, 16}, 11);
  check({"matmul batched q @ k^T", "matmul", {q, k.transpose(-2, -1)}, at::matmul(f(q), f(k).transpose(-2, -1))});
  check({"matmul batched, B broadcast over heads (copied)", "matmul", {q, kShared}, at::matmul(f(q), f(kShared)),
         2 * 3 * 8 * 16 * element});
  const at::Tensor k2 = t({8, 16}, 12);
  check({"matmul [2, 3, 16, 8] @ [8, 16] (folded)", "matmul", {q, k2}, at::matmul(f(q), f(k2))});
  const at::Tensor p = t({16, 16}, 13);
  check({"matmul [16, 16] @ [2, 3, 16, 8] (A shared)", "matmul", {p, q}, at::matmul(f(p), f(q))});
  // Several blocks of the widened products along every axis, and a long sum.
  const at::Tensor big = t({300, 600}, 14), wide = t({520, 600}, 15);
  check({"linear 300 x 600 -> 520", "linear", {big, wide}, at::mm(f(big), f(wide).t())});
  const at::Tensor gBig = t({600, 300}, 16), xBig = t({600, 520}, 17);
  check({"linear_weight_grad, 600 terms", "linear_weight_grad", {gBig, xBig}, at::mm(f(gBig).t(), f(xBig))});
}

}  // namespace

TEST_CASE("bf16 and f16 products: declared workspace == what the kernel allocates, values one rounding off f32") {
  for (onednn::Bf16Route route : routesHere()) {
    RouteScope scope(route);
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      INFO("route " << std::string(onednn::nameOf(route)) << ", threads " << threads);
      checkAllLayouts(at::kBFloat16);
      checkAllLayouts(at::kHalf);  // widened on every route
    }
  }
  at::set_num_threads(1);
}

TEST_CASE("bf16 products: the route follows the CPU's bf16 instructions") {
  // oneDNN only where its kernel runs on bf16 instructions; emulated bf16 (AVX-512 without
  // AVX512_BF16) and no kernel at all (AVX2) take the widened products.
  if (std::getenv("GRADC_BF16_PRODUCTS") == nullptr) {
    CHECK((onednn::bf16Route() == onednn::Bf16Route::kOneDnn) == onednn::native());
  }
  CHECK((!onednn::native() || onednn::available()));
  const std::string here = std::string("bf16 products here: ") + onednn::nameOf(onednn::bf16Route()) +
                           " (oneDNN kernel: " + (onednn::available() ? "yes" : "no") +
                           ", bf16 instructions: " + (onednn::native() ? "yes" : "no") + ")";
  MESSAGE(here);
  if (!onednn::available()) CHECK_FALSE(onednn::imposeBf16Route(onednn::Bf16Route::kOneDnn));
}

TEST_CASE("bf16 products on oneDNN: the same bits as ATen's product without a bias") {
  if (!onednn::available()) return;
  RouteScope scope(onednn::Bf16Route::kOneDnn);
  at::set_num_threads(1);
  const at::Tensor a = lowp({2, 3, 16, 8}, 20, at::kBFloat16), b = lowp({2, 3, 8, 24}, 21, at::kBFloat16);
  Expected<std::vector<at::Tensor>> r = runtime::callOp("matmul", std::vector<at::Tensor>{a, b});
  REQUIRE(r.ok());
  CHECK(at::equal((*r)[0], at::matmul(a, b)));
  const at::Tensor x = lowp({40, 96}, 22, at::kBFloat16), w = lowp({48, 96}, 23, at::kBFloat16);
  r = runtime::callOp("linear", std::vector<at::Tensor>{x, w});
  REQUIRE(r.ok());
  CHECK(at::equal((*r)[0], at::mm(x, w.t())));
}

TEST_CASE("oneDNN products: the bound covers every layout; a short scratchpad runs nothing") {
  if (!onednn::available()) return;
  const std::int64_t m = 48, k = 700, n = 40;
  const onednn::ProductShape shape{.m = m, .k = k, .n = n};
  for (int threads : {1, 2}) {
    const std::int64_t bound = onednn::scratchpadBound(shape, threads);
    const onednn::MatrixLayout rowA{1, m, k, 0, k, 1}, colA{1, m, k, 0, 1, m}, padA{1, m, k, 0, 2 * k, 1};
    const onednn::MatrixLayout rowB{1, k, n, 0, n, 1}, colB{1, k, n, 0, 1, k};
    for (const auto& la : {rowA, colA, padA})
      for (const auto& lb : {rowB, colB}) {
        std::optional<std::int64_t> need = onednn::scratchpadBytes({.a = la, .b = lb}, threads);
        REQUIRE(need);
        CHECK(*need <= bound);
      }
    MESSAGE("scratchpad bound for [48, 700] @ [700, 40], " << threads << " thread(s): " << bound << " B ("
                                                           << onednn::implementation({.a = rowA, .b = rowB}, threads)
                                                           << ")");
  }
  // Per-thread panels: two threads need more than one.
  CHECK(onednn::scratchpadBound(shape, 2) > onednn::scratchpadBound(shape, 1));

  const onednn::Product p{.a = {1, m, k, 0, k, 1}, .b = {1, k, n, 0, n, 1}};
  at::set_num_threads(1);
  const std::int64_t need = *onednn::scratchpadBytes(p, 1);
  REQUIRE(need > 0);
  at::Tensor a = lowp({m, k}, 30, at::kBFloat16), b = lowp({k, n}, 31, at::kBFloat16);
  at::Tensor c = at::full({m, n}, 7.0, at::kBFloat16);
  std::vector<std::uint8_t> scratch(static_cast<size_t>(need));
  const std::string refused = onednn::run(p, a.data_ptr(), b.data_ptr(), nullptr, c.data_ptr(), scratch.data(), need - 64);
  CHECK(refused.find("scratchpad of " + std::to_string(need)) != std::string::npos);
  CHECK(at::equal(c, at::full({m, n}, 7.0, at::kBFloat16)));  // untouched
  CHECK(onednn::run(p, a.data_ptr(), b.data_ptr(), nullptr, c.data_ptr(), scratch.data(), need).empty());
  CHECK(at::equal(c, at::mm(a, b)));
}
