// conv2d's kernels on oneDNN (runtime/kernels/onednn_conv.h, onednn/conv.h): the declared workspace is
// oneDNN's answer, the kernel allocates exactly that, and the three passes equal ATen's
// convolution and its autograd within f32 tolerance, over strides, padding, dilation, groups,
// rectangular windows and a bias, at 1 and 2 threads; run in chunks of samples, each chunk size
// gives the same result and the op table's chunk keeps the workspace within the im2col
// kernel's. f64 keeps the im2col kernel.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "ir/conv_problem.h"
#include "runtime/host/host_conv_problem.h"
#include "ir/op_table.h"
#include "onednn/conv.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_tracker.h"

#undef CHECK
#include <doctest/doctest.h>

#include "tests/runtime/op_allocation.h"  // after doctest

using namespace gradc;

namespace {

ir::Shape shapeOf(const at::Tensor& t) { return ir::Shape(t.sizes().begin(), t.sizes().end()); }

ir::TensorType typeOf(const at::Tensor& t) {
  return {t.scalar_type() == at::kDouble ? ir::DType::f64 : ir::DType::f32, shapeOf(t)};
}

std::int64_t declared(std::string_view op, const std::vector<at::Tensor>& operands, const ir::AttrMap& attrs,
                      const at::Tensor& result) {
  std::vector<ir::TensorType> in;
  for (const at::Tensor& t : operands) in.push_back(typeOf(t));
  std::vector<ir::TensorType> out{typeOf(result)};
  return ir::opWorkspaceBytes(*ir::findOp(op), in, attrs, out, at::get_num_threads());
}

// Runs the op; checks what it allocated (its result and its declared workspace) and returns it.
at::Tensor run(std::string_view op, std::vector<at::Tensor> operands, const ir::AttrMap& attrs) {
  const testing::OpRun r = testing::runOp(op, operands, attrs);
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
  std::vector<std::int64_t> stride, padding, dilation;
  std::int64_t groups = 1;
};

}  // namespace

TEST_CASE("oneDNN convolutions: declared workspace == allocated, the three passes equal ATen's") {
  const std::vector<Problem> problems{
      {"3x3 s1 p1 (ResNet)", {4, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"3x3 s2 p1", {3, 16, 11, 13}, {24, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}},
      {"1x1 s2 (shortcut)", {2, 16, 8, 8}, {32, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}},
      {"3-channel stem", {2, 3, 16, 16}, {16, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"groups 2, dilation (1, 2), padding (1, 0)", {2, 8, 9, 10}, {6, 4, 3, 3}, {1, 1}, {1, 0}, {1, 2}, 2},
      {"rectangular 3x5, stride (2, 1), padding (1, 2)", {2, 5, 9, 11}, {7, 5, 3, 5}, {2, 1}, {1, 2}, {1, 1}},
  };
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const Problem& p : problems)
      for (bool bias : {false, true}) {
        INFO(p.name << (bias ? ", bias" : "") << ", " << threads << " thread(s)");
        at::manual_seed(3);
        const at::Tensor x = at::randn(p.x), w = at::randn(p.w), b = at::randn({p.w[0]});
        ir::AttrMap window{{"stride", p.stride}, {"padding", p.padding}, {"dilation", p.dilation}, {"groups", p.groups}};
        std::vector<at::Tensor> operands{x, w};
        if (bias) operands.push_back(b);
        const at::Tensor y = run("conv2d", operands, window);
        const at::Tensor ref = at::convolution(x, w, bias ? b : at::Tensor(), p.stride, p.padding, p.dilation, false,
                                               {0, 0}, p.groups);
        CHECK(relErr(y, ref) <= 1e-5);

        const at::Tensor gy = at::randn(y.sizes());
        ir::AttrMap inputGrad = window, weightGrad = window;
        inputGrad["input_shape"] = p.x;
        weightGrad["weight_shape"] = p.w;
        const at::Tensor gx = run("conv2d_input_grad", {gy, w}, inputGrad);
        const at::Tensor gw = run("conv2d_weight_grad", {gy, x}, weightGrad);
        auto [refGx, refGw, refGb] = at::convolution_backward(gy, x, w, c10::nullopt, p.stride, p.padding, p.dilation,
                                                             false, {0, 0}, p.groups, {true, true, false});
        CHECK(relErr(gx, refGx) <= 1e-5);
        CHECK(relErr(gw, refGw) <= 1e-5);

        // The plan's workspace is oneDNN's, where oneDNN has a blocked kernel (AVX-512 or AVX2).
        std::optional<onednn::ConvShape> s = runtime::host::oneDnnConvShape(window, shapeOf(x), shapeOf(w), shapeOf(y), bias);
        REQUIRE(s);
        for (onednn::ConvPass pass :
             {onednn::ConvPass::Forward, onednn::ConvPass::InputGrad, onednn::ConvPass::WeightGrad}) {
          const std::optional<std::int64_t> bytes = onednn::convWorkspaceBytes(*s, pass, threads, s->n);
          if (!bytes) continue;
          CHECK(onednn::convImplementation(*s, pass, threads).rfind("ref", 0) != 0);
        }
        if (auto chosen = runtime::host::oneDnnConvPass(window, onednn::ConvPass::Forward, typeOf(x), typeOf(w), typeOf(y), bias,
                                             threads))
          CHECK(declared("conv2d", operands, window, y) == chosen->chunking.workspaceBytes);
      }
  }
  at::set_num_threads(1);
}

TEST_CASE("oneDNN convolutions: a ResNet stage runs on a blocked kernel here, f64 on im2col") {
  const onednn::ConvShape s{.n = 32, .c = 64, .h = 32, .w = 32, .o = 64, .kh = 3, .kw = 3, .oh = 32, .ow = 32,
                            .padding = {1, 1}};
  const std::string forward = onednn::convImplementation(s, onednn::ConvPass::Forward, 1);
  MESSAGE("oneDNN's kernel for a [32, 64, 32, 32] 3x3 convolution: " << (forward.empty() ? "none" : forward));
  if (!forward.empty()) CHECK(forward.find("jit") != std::string::npos);
  // f64: the im2col kernel and its column workspace.
  at::manual_seed(4);
  const at::Tensor x = at::randn({2, 4, 6, 6}, at::kDouble), w = at::randn({5, 4, 3, 3}, at::kDouble);
  ir::AttrMap window{{"stride", std::vector<std::int64_t>{1, 1}},
                     {"padding", std::vector<std::int64_t>{1, 1}},
                     {"dilation", std::vector<std::int64_t>{1, 1}},
                     {"groups", std::int64_t{1}}};
  const at::Tensor y = run("conv2d", {x, w}, window);
  CHECK(relErr(y, at::conv2d(x, w, {}, 1, 1)) <= 1e-12);
}

namespace {

// One pass through onednn::runConv directly, `chunk` samples at a time, into a fresh result.
at::Tensor runChunked(const onednn::ConvShape& s, onednn::ConvPass pass, std::int64_t chunk, const at::Tensor& x,
                      const at::Tensor& w, const at::Tensor& gy) {
  const std::optional<std::int64_t> bytes = onednn::convWorkspaceBytes(s, pass, at::get_num_threads(), chunk);
  REQUIRE(bytes);
  at::Tensor workspace = at::empty({*bytes}, at::kByte);
  at::Tensor out = at::full(pass == onednn::ConvPass::Forward     ? gy.sizes()
                            : pass == onednn::ConvPass::InputGrad ? x.sizes()
                                                                  : w.sizes(),
                            std::nan(""));
  onednn::ConvBuffers b{.x = x.data_ptr(), .w = w.data_ptr(), .gy = gy.data_ptr()};
  (pass == onednn::ConvPass::Forward ? b.y : pass == onednn::ConvPass::InputGrad ? b.gx : b.gw) = out.data_ptr();
  CHECK(onednn::runConv(s, pass, chunk, b, workspace.data_ptr(), *bytes) == "");
  // A workspace one byte short runs nothing.
  CHECK(onednn::runConv(s, pass, chunk, b, workspace.data_ptr(), *bytes - 1) != "");
  return out;
}

}  // namespace

TEST_CASE("oneDNN convolutions in chunks of samples: every chunk size gives ATen's result") {
  const onednn::ConvShape s{.n = 7, .c = 16, .h = 10, .w = 9, .o = 24, .kh = 3, .kw = 3, .oh = 5, .ow = 5,
                            .stride = {2, 2}, .padding = {1, 1}};
  if (!onednn::convWorkspaceBytes(s, onednn::ConvPass::Forward, 1, s.n)) {
    MESSAGE("no blocked oneDNN kernel here");
    return;
  }
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    at::manual_seed(5);
    const at::Tensor x = at::randn({s.n, s.c, s.h, s.w}), w = at::randn({s.o, s.c, s.kh, s.kw});
    const at::Tensor gy = at::randn({s.n, s.o, s.oh, s.ow});
    const at::Tensor y = at::conv2d(x, w, {}, 2, 1);
    auto [gx, gw, gb] = at::convolution_backward(gy, x, w, c10::nullopt, {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 1,
                                                 {true, true, false});
    for (std::int64_t chunk : {1, 2, 3, 7}) {  // 3: two chunks of 3 and one of 1
      INFO("chunk " << chunk << ", " << threads << " thread(s)");
      CHECK(relErr(runChunked(s, onednn::ConvPass::Forward, chunk, x, w, gy), y) <= 1e-5);
      CHECK(relErr(runChunked(s, onednn::ConvPass::InputGrad, chunk, x, w, gy), gx) <= 1e-5);
      CHECK(relErr(runChunked(s, onednn::ConvPass::WeightGrad, chunk, x, w, gy), gw) <= 1e-5);
    }
    // convChunking: the largest chunk within the limit, never below one sample.
    for (onednn::ConvPass pass :
         {onednn::ConvPass::Forward, onednn::ConvPass::InputGrad, onednn::ConvPass::WeightGrad}) {
      const std::int64_t one = *onednn::convWorkspaceBytes(s, pass, threads, 1);
      const std::int64_t three = *onednn::convWorkspaceBytes(s, pass, threads, 3);
      const std::int64_t four = *onednn::convWorkspaceBytes(s, pass, threads, 4);
      CHECK(onednn::convChunking(s, pass, threads, 0)->chunk == 1);
      CHECK(onednn::convChunking(s, pass, threads, 0)->workspaceBytes == one);
      CHECK(onednn::convChunking(s, pass, threads, std::int64_t{1} << 40)->chunk == s.n);
      if (four > three) {
        const onednn::ConvChunking c = *onednn::convChunking(s, pass, threads, three);
        CHECK(c.chunk >= 3);
        CHECK(c.workspaceBytes <= three);
        CHECK(c.chunk < 4);
      }
    }
  }
  at::set_num_threads(1);
}

TEST_CASE("oneDNN convolutions: a batch larger than the im2col workspace allows runs in chunks, exactly planned") {
  // [24, 16, 32, 32] 3x3: the im2col kernel holds 4 samples' columns (2.6 MB); all 24 samples'
  // blocked copies would take 3 MB, so the op table picks a chunk below 24.
  const std::vector<std::int64_t> xs{24, 16, 32, 32}, ws{16, 16, 3, 3};
  ir::AttrMap window{{"stride", std::vector<std::int64_t>{1, 1}},
                     {"padding", std::vector<std::int64_t>{1, 1}},
                     {"dilation", std::vector<std::int64_t>{1, 1}},
                     {"groups", std::int64_t{1}}};
  at::manual_seed(6);
  const at::Tensor x = at::randn(xs), w = at::randn(ws), b = at::randn({16});
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    INFO(threads << " thread(s)");
    const at::Tensor y = run("conv2d", {x, w, b}, window);
    CHECK(relErr(y, at::conv2d(x, w, b, 1, 1)) <= 1e-5);
    const std::optional<runtime::host::OneDnnConvPass> chosen =
        runtime::host::oneDnnConvPass(window, onednn::ConvPass::Forward, typeOf(x), typeOf(w), typeOf(y), true, threads);
    if (!chosen) continue;  // no blocked kernel here: the im2col kernel ran
    const std::int64_t im2col = ir::im2colWorkspaceBytes(window, typeOf(w), typeOf(y));
    CHECK(chosen->chunking.chunk < xs[0]);
    CHECK(chosen->chunking.workspaceBytes <= im2col);
    const at::Tensor gy = at::randn(y.sizes());
    ir::AttrMap inputGrad = window, weightGrad = window;
    inputGrad["input_shape"] = xs;
    weightGrad["weight_shape"] = ws;
    auto [refGx, refGw, refGb] = at::convolution_backward(gy, x, w, c10::nullopt, {1, 1}, {1, 1}, {1, 1}, false,
                                                         {0, 0}, 1, {true, true, false});
    CHECK(relErr(run("conv2d_input_grad", {gy, w}, inputGrad), refGx) <= 1e-5);
    CHECK(relErr(run("conv2d_weight_grad", {gy, x}, weightGrad), refGw) <= 1e-5);
    for (onednn::ConvPass pass : {onednn::ConvPass::InputGrad, onednn::ConvPass::WeightGrad})
      CHECK(runtime::host::oneDnnConvPass(window, pass, typeOf(x), typeOf(w), typeOf(y), false, threads)->chunking.workspaceBytes <=
            im2col);
  }
  at::set_num_threads(1);
}
