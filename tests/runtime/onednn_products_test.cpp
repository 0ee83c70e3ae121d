// bf16 matrix products on oneDNN (runtime/kernels/onednn_products.h, onednn/gemm.h): the op table's
// workspace is oneDNN's scratchpad, the kernel allocates exactly that, and the products equal
// ATen's (the same oneDNN kernels) or, with a bias, the f32 product rounded once.
//
// On a CPU where oneDNN has no bf16 kernel (no AVX-512), the rules declare nothing and the
// kernels run ATen's loops, which allocate nothing: the cases below then check exactly that.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ir/op_table.h"
#include "onednn/gemm.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;

namespace {

at::Tensor bf16(std::vector<std::int64_t> shape, int seed) {
  at::manual_seed(seed);
  return at::randn(shape).to(at::kBFloat16);
}

std::int64_t declaredWorkspace(std::string_view op, const std::vector<at::Tensor>& operands,
                               const at::Tensor& result) {
  std::vector<ir::TensorType> in;
  for (const at::Tensor& t : operands) in.push_back({ir::DType::bf16, ir::Shape(t.sizes().begin(), t.sizes().end())});
  std::vector<ir::TensorType> out{{ir::DType::bf16, ir::Shape(result.sizes().begin(), result.sizes().end())}};
  return ir::opWorkspaceBytes(*ir::findOp(op), in, {}, out, at::get_num_threads());
}

struct Case {
  std::string name, op;
  std::vector<at::Tensor> operands;
  at::Tensor reference;  // the f32 product of the bf16 operands
  bool copies = false;   // the kernel copies a strided operand first (the planner's hidden copy)
};

// Runs the op, checks its allocation (result + declared workspace, plus its copies) and its value.
void check(const Case& c) {
  INFO(c.name);
  runtime::MemoryTracker::install();
  const std::int64_t before = runtime::MemoryTracker::outsideBytes();
  runtime::MemoryTracker::resetOutsidePeak();
  Expected<std::vector<at::Tensor>> r = runtime::callOp(c.op, c.operands);
  REQUIRE_MESSAGE(r.ok(), r.error().message);
  const at::Tensor& out = (*r)[0];
  const std::int64_t allocated = runtime::MemoryTracker::outsidePeakBytes() - before;
  const std::int64_t declared = declaredWorkspace(c.op, c.operands, out);
  if (onednn::available()) {
    CHECK(declared > 0);
    if (!c.copies) CHECK(allocated == static_cast<std::int64_t>(out.nbytes()) + declared);
    else CHECK(allocated > static_cast<std::int64_t>(out.nbytes()) + declared);
  } else {
    CHECK(declared == 0);
  }
  // One rounding of an f32 accumulation: within one bf16 ulp (2^-8 relative) of the f32 product,
  // plus the f32 summation order's error.
  const at::Tensor ref = c.reference.to(at::kDouble), ours = out.to(at::kDouble);
  const double scale = ref.abs().max().item<double>();
  const double worst = ((ours - ref).abs() - ref.abs() * (1.0 / 256)).max().item<double>();
  CHECK(worst <= scale * 1e-5);
}

}  // namespace

TEST_CASE("bf16 products: declared workspace == what the kernel allocates, values one rounding off f32") {
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    INFO("threads " << threads);
    const at::Tensor x = bf16({3, 7, 96}, 1), w = bf16({40, 96}, 2), bias = bf16({40}, 3);
    const at::Tensor xf = x.to(at::kFloat), wf = w.to(at::kFloat), bf = bias.to(at::kFloat);
    check({"linear", "linear", {x, w}, at::matmul(xf, wf.t())});
    check({"linear with bias", "linear", {x, w, bias}, at::matmul(xf, wf.t()) + bf});
    check({"linear, strided input (copied)", "linear", {x.transpose(0, 1), w},
           at::matmul(xf.transpose(0, 1), wf.t()), true});
    const at::Tensor g = bf16({3, 7, 40}, 4);
    check({"linear_weight_grad", "linear_weight_grad", {g, x},
           at::mm(g.to(at::kFloat).reshape({-1, 40}).t(), xf.reshape({-1, 96}))});

    const at::Tensor a = bf16({33, 64}, 5), b = bf16({64, 17}, 6);
    check({"matmul 2-D", "matmul", {a, b}, at::mm(a.to(at::kFloat), b.to(at::kFloat))});
    check({"matmul 2-D, both transposed views", "matmul", {b.t(), a.t()},
           at::mm(b.to(at::kFloat).t(), a.to(at::kFloat).t())});
    const at::Tensor a3 = bf16({4, 33, 64}, 7);
    check({"matmul folded [4, 33, 64] @ [64, 17]", "matmul", {a3, b}, at::matmul(a3.to(at::kFloat), b.to(at::kFloat))});
    const at::Tensor a3t = bf16({4, 64, 33}, 8).transpose(1, 2);
    check({"matmul transposed 3-D @ 2-D (batched, B shared)", "matmul", {a3t, b},
           at::matmul(a3t.to(at::kFloat), b.to(at::kFloat))});
    // Attention's shapes: [B, H, T, D] @ [B, H, D, T] and a key shared over heads.
    const at::Tensor q = bf16({2, 3, 16, 8}, 9), k = bf16({2, 3, 16, 8}, 10), kShared = bf16({2, 1, 8, 16}, 11);
    check({"matmul batched q @ k^T", "matmul", {q, k.transpose(-2, -1)},
           at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1))});
    check({"matmul batched, B broadcast over heads (copied)", "matmul", {q, kShared},
           at::matmul(q.to(at::kFloat), kShared.to(at::kFloat)), true});
    const at::Tensor k2 = bf16({8, 16}, 12);
    check({"matmul [2, 3, 16, 8] @ [8, 16] (folded)", "matmul", {q, k2},
           at::matmul(q.to(at::kFloat), k2.to(at::kFloat))});
    const at::Tensor p = bf16({16, 16}, 13);
    check({"matmul [16, 16] @ [2, 3, 16, 8] (A shared)", "matmul", {p, q},
           at::matmul(p.to(at::kFloat), q.to(at::kFloat))});
  }
  at::set_num_threads(1);
}

TEST_CASE("bf16 products: the same bits as ATen's product without a bias") {
  if (!onednn::available()) return;
  at::set_num_threads(1);
  const at::Tensor a = bf16({2, 3, 16, 8}, 20), b = bf16({2, 3, 8, 24}, 21);
  Expected<std::vector<at::Tensor>> r = runtime::callOp("matmul", std::vector<at::Tensor>{a, b});
  REQUIRE(r.ok());
  CHECK(at::equal((*r)[0], at::matmul(a, b)));
  const at::Tensor x = bf16({40, 96}, 22), w = bf16({48, 96}, 23);
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
  at::Tensor a = bf16({m, k}, 30), b = bf16({k, n}, 31), c = at::full({m, n}, 7.0, at::kBFloat16);
  std::vector<std::uint8_t> scratch(static_cast<size_t>(need));
  const std::string refused = onednn::run(p, a.data_ptr(), b.data_ptr(), nullptr, c.data_ptr(), scratch.data(), need - 64);
  CHECK(refused.find("scratchpad of " + std::to_string(need)) != std::string::npos);
  CHECK(at::equal(c, at::full({m, n}, 7.0, at::kBFloat16)));  // untouched
  CHECK(onednn::run(p, a.data_ptr(), b.data_ptr(), nullptr, c.data_ptr(), scratch.data(), need).empty());
  CHECK(at::equal(c, at::mm(a, b)));
}
