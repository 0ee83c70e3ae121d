// bf16 and f16 convolutions on the host (runtime/kernels/kernels_conv.cpp): the im2col kernel with
// this file's own im2col and col2im and gradc's low-precision products, on every route of the
// products this CPU has. Each pass allocates exactly its result and its declared workspace (the
// columns and one product's temporaries), and equals the f32 convolution of the same operands
// within the roundings its arithmetic makes: one per product, one for the bias, and one per
// addition that col2im and the weight gradient's sum over samples make in the result's dtype
// (at most 10 here).
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "onednn/gemm.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

#undef CHECK
#include <doctest/doctest.h>

#include "tests/runtime/op_allocation.h"  // after doctest

using namespace gradc;

namespace {

// Runs the op; checks what it allocated (its result and its declared workspace) and returns it.
at::Tensor run(std::string_view op, std::vector<at::Tensor> operands, const ir::AttrMap& attrs) {
  const testing::OpRun r = testing::runOp(op, operands, attrs);
  CHECK(r.declared > 0);
  CHECK(r.allocated == static_cast<std::int64_t>(r.result.nbytes()) + r.declared);
  return r.result;
}

double relErr(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>() /
         std::max(b.to(at::kDouble).abs().max().item<double>(), 1e-30);
}

struct Problem {
  std::string name;
  std::vector<std::int64_t> x, w;  // [N, C, H, W], [O, C / groups, kh, kw]
  std::vector<std::int64_t> stride, padding;
  std::int64_t groups = 1;
};

void checkProblem(const Problem& p, at::ScalarType dtype) {
  const double tolerance = 10.0 * (dtype == at::kHalf ? 1.0 / 2048 : 1.0 / 256);
  at::manual_seed(5);
  const at::Tensor x = at::randn(p.x).to(dtype), w = at::randn(p.w).to(dtype), b = at::randn({p.w[0]}).to(dtype);
  const at::Tensor xf = x.to(at::kFloat), wf = w.to(at::kFloat), bf = b.to(at::kFloat);
  const std::vector<std::int64_t> dilation{1, 1};
  ir::AttrMap window{{"stride", p.stride}, {"padding", p.padding}, {"dilation", dilation}, {"groups", p.groups}};
  const at::Tensor y = run("conv2d", {x, w, b}, window);
  CHECK(relErr(y, at::convolution(xf, wf, bf, p.stride, p.padding, dilation, false, {0, 0}, p.groups)) <= tolerance);

  const at::Tensor gy = at::randn(y.sizes()).to(dtype);
  ir::AttrMap inputGrad = window, weightGrad = window;
  inputGrad["input_shape"] = p.x;
  weightGrad["weight_shape"] = p.w;
  const at::Tensor gx = run("conv2d_input_grad", {gy, w}, inputGrad);
  const at::Tensor gw = run("conv2d_weight_grad", {gy, x}, weightGrad);
  auto [refGx, refGw, refGb] = at::convolution_backward(gy.to(at::kFloat), xf, wf, c10::nullopt, p.stride, p.padding,
                                                       dilation, false, {0, 0}, p.groups, {true, true, false});
  CHECK(relErr(gx, refGx) <= tolerance);
  CHECK(relErr(gw, refGw) <= tolerance);
}

}  // namespace

TEST_CASE("bf16 and f16 convolutions: declared workspace == allocated, near the f32 convolution, every route") {
  const std::vector<Problem> problems{
      {"3x3 s1 p1, small output (several samples per product)", {4, 8, 4, 4}, {12, 8, 3, 3}, {1, 1}, {1, 1}},
      {"3x3 s1 p1, one sample per product", {2, 8, 20, 20}, {12, 8, 3, 3}, {1, 1}, {1, 1}},
      {"1x1 s1 (pointwise: the image is its own columns)", {2, 8, 20, 20}, {16, 8, 1, 1}, {1, 1}, {0, 0}},
      {"3x3 s2 p1, groups 2", {3, 8, 21, 19}, {6, 4, 3, 3}, {2, 2}, {1, 1}, 2},
  };
  std::vector<onednn::Bf16Route> routes{onednn::Bf16Route::kWidened};
  if (onednn::available()) routes.push_back(onednn::Bf16Route::kOneDnn);
  for (onednn::Bf16Route route : routes) {
    REQUIRE(onednn::imposeBf16Route(route));
    for (int threads : {1, 2}) {
      at::set_num_threads(threads);
      for (const Problem& p : problems) {
        const std::string label = p.name + ", route " + onednn::nameOf(route) + ", " + std::to_string(threads) + " thread(s)";
        INFO(label);
        checkProblem(p, at::kBFloat16);
        checkProblem(p, at::kHalf);
      }
    }
  }
  onednn::imposeBf16Route(std::nullopt);
  at::set_num_threads(1);
}
