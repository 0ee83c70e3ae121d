// The portable kernels of the ops the host runs with its own kernels (runtime/kernels/kernels.h: the
// host's loops, oneDNN and row-blocked products; the portable ones ATen compositions such as
// runtime/kernels/kernels_conv_device.h's) run on the CPU too: here each is checked against the host's
// on the same operands, so what a GPU runs is the op's arithmetic before a GPU ever runs it.
// The dropout element function the CUDA kernel draws with (runtime/cuda/philox_element.h) is
// checked against the CPU's generator in counter_rng_test.cpp.
#include <ATen/ATen.h>

#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/kernels_conv_device.h"


// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's.
#undef CHECK
#include <doctest/doctest.h>

namespace gradc::runtime {
namespace {

using DeviceKernel = std::vector<at::Tensor> (*)(const KernelArgs&);

ir::TensorType typeOf(const at::Tensor& t) { return ir::TensorType{*fromScalarType(t.scalar_type()), t.sizes().vec()}; }

// The op run by the CPU kernel (callOp) and by its device path on the same node.
double worstDifference(std::string_view op, DeviceKernel devicePath, const std::vector<at::Tensor>& operands,
                       const ir::AttrMap& attrs) {
  Expected<std::vector<at::Tensor>> cpu = callOp(op, operands, attrs);
  REQUIRE_MESSAGE(cpu.ok(), (cpu.ok() ? "" : cpu.error().message));
  ir::Graph graph("device_path");
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < operands.size(); ++i)
    values.push_back(graph.addInput("x" + std::to_string(i), typeOf(operands[i])));
  Expected<ir::Node*> node = graph.create(op, values, attrs);
  REQUIRE(node.ok());
  // In-place ops (running statistics) update their operands: give each side its own copies.
  std::vector<at::Tensor> copies;
  for (const at::Tensor& t : operands) copies.push_back(t.clone());
  const RunContext ctx;
  const std::vector<at::Tensor> device = devicePath(KernelArgs{**node, copies, ctx});
  REQUIRE(device.size() == cpu->size());
  double worst = 0;
  for (size_t i = 0; i < device.size(); ++i) {
    const at::Tensor a = (*cpu)[i].to(at::kDouble), b = device[i].to(at::kDouble);
    worst = std::max(worst, (a - b).abs().max().item<double>() / std::max(1.0, a.abs().max().item<double>()));
  }
  return worst;
}

double portableDifference(std::string_view op, const std::vector<at::Tensor>& operands, const ir::AttrMap& attrs) {
  const KernelFn* portable = findPortableKernel(op);
  REQUIRE_MESSAGE(portable, (std::string(op) + " has no portable kernel"));
  return worstDifference(op, *portable, operands, attrs);
}

}  // namespace

// dropout needs a device's own kernel (no ATen call draws gradc's mask); fused regions run
// generated code (a device without it runs the artifact's reference step).
TEST_CASE("kernel table: every op runs on the host, and every op but dropout and fused has a portable kernel") {
  for (const ir::OpInfo& op : ir::allOps()) {
    CHECK_MESSAGE(findKernel(op.name, cpuDevice()) != nullptr, "no host kernel for " << op.name);
    if (op.name != "dropout" && op.name != "fused") CHECK_MESSAGE(findPortableKernel(op.name) != nullptr, "no portable kernel for " << op.name);
  }
  // The host's own kernels are found before the portable ones, for ops the op table knows.
  for (const KernelEntry& e : hostKernels()) {
    CHECK_MESSAGE(ir::findOp(e.op) != nullptr, "host kernel for unknown op " << e.op);
    const bool own = *findKernel(e.op, cpuDevice()) == e.fn;
    CHECK_MESSAGE(own, "the host does not run its own kernel of " << e.op);
  }
  CHECK(findPortableKernel("dropout") == nullptr);
}

TEST_CASE("device paths: the losses, products, attention and pooling equal the host's kernels") {
  at::manual_seed(21);
  const at::Tensor logits = at::randn({24, 37});
  const at::Tensor target = at::randint(0, 37, {24}, at::kLong).index_put_({at::tensor({3, 9}, at::kLong)},
                                                                         at::scalar_tensor(-1, at::kLong));
  const ir::AttrMap smoothing{{"label_smoothing", 0.1}, {"ignore_index", std::int64_t{-1}}};
  CHECK(portableDifference("cross_entropy", {logits, target}, smoothing) < 1e-6);
  CHECK(portableDifference("cross_entropy_backward", {at::ones({}), logits, target}, smoothing) < 1e-6);
  const at::Tensor classes = at::randint(0, 37, {24}, at::kLong);
  CHECK(portableDifference("cross_entropy_backward", {at::ones({}), logits, classes}, {}) < 1e-6);

  // Products over more rows than one of the host's row blocks.
  const at::Tensor x = at::randn({3, 700, 24}), w = at::randn({40, 24}), bias = at::randn({40});
  CHECK(portableDifference("linear", {x, w, bias}, {}) < 1e-5);
  CHECK(portableDifference("matmul", {at::randn({3, 700, 40}), w}, {}) < 1e-5);
  CHECK(portableDifference("linear_weight_grad", {at::randn({3, 700, 40}), x}, {}) < 1e-5);
  CHECK(portableDifference("linear_cross_entropy", {x, w, at::randint(0, 40, {3, 700}, at::kLong), bias},
                           {{"chunks", std::int64_t{3}}}) < 1e-5);

  // Attention, causal, with grouped key heads (2 query heads per key head: k and v broadcast).
  const at::Tensor q = at::randn({2, 2, 2, 70, 8}), k = at::randn({2, 2, 1, 70, 8}), v = at::randn({2, 2, 1, 70, 8});
  const ir::AttrMap attention{{"causal", true}, {"scale", 0.35}};
  CHECK(portableDifference("attention", {q, k, v}, attention) < 1e-5);
  Expected<std::vector<at::Tensor>> fwd = callOp("attention", std::vector<at::Tensor>{q, k, v}, attention);
  REQUIRE(fwd.ok());
  CHECK(portableDifference("attention_backward", {at::randn(q.sizes()), q, k, v, (*fwd)[0], (*fwd)[1]}, attention) <
        1e-5);

  const at::Tensor images = at::randn({3, 5, 9, 11});
  CHECK(portableDifference("adaptive_avg_pool2d", {images}, {{"output_size", std::vector<std::int64_t>{4, 3}}}) < 1e-6);
  CHECK(portableDifference("adaptive_avg_pool2d_backward", {at::randn({3, 5, 4, 3})},
                           {{"input_shape", std::vector<std::int64_t>{3, 5, 9, 11}}}) < 1e-6);

  // bf16, where the host's kernels loop in float (ATen 2.x would copy the operand to float).
  const at::Tensor h = at::randn({6, 33}).to(at::kBFloat16), scale = at::rand({33}).add(0.5).to(at::kBFloat16);
  CHECK(portableDifference("rms_norm", {h, scale}, {{"eps", 1e-6}}) < 2e-2);
  CHECK(portableDifference("embedding_backward", {at::randn({5, 7, 16}).to(at::kBFloat16), at::randint(0, 9, {5, 7}, at::kLong)},
                           {{"num", std::int64_t{9}}}) < 2e-2);
}

TEST_CASE("device paths: convolution and its gradients equal the CPU kernels") {
  at::manual_seed(11);
  const at::Tensor x = at::randn({3, 4, 11, 10}), w = at::randn({6, 2, 3, 3}), bias = at::randn({6});
  for (const std::vector<std::int64_t>& stride : {std::vector<std::int64_t>{1, 1}, std::vector<std::int64_t>{2, 1}}) {
    CAPTURE(stride[0]);
    const ir::AttrMap window{{"stride", stride},
                             {"padding", std::vector<std::int64_t>{1, 0}},
                             {"dilation", std::vector<std::int64_t>{1, 2}},
                             {"groups", std::int64_t{2}}};
    CHECK(worstDifference("conv2d", conv_device::conv2d, {x, w}, window) < 1e-5);
    CHECK(worstDifference("conv2d", conv_device::conv2d, {x, w, bias}, window) < 1e-5);
    Expected<std::vector<at::Tensor>> y = callOp("conv2d", std::vector<at::Tensor>{x, w}, window);
    REQUIRE(y.ok());
    const at::Tensor gy = at::randn((*y)[0].sizes());
    ir::AttrMap inputGrad = window, weightGrad = window;
    inputGrad["input_shape"] = std::vector<std::int64_t>(x.sizes().begin(), x.sizes().end());
    weightGrad["weight_shape"] = std::vector<std::int64_t>(w.sizes().begin(), w.sizes().end());
    CHECK(worstDifference("conv2d_input_grad", conv_device::conv2dInputGrad, {gy, w}, inputGrad) < 1e-5);
    CHECK(worstDifference("conv2d_weight_grad", conv_device::conv2dWeightGrad, {gy, x}, weightGrad) < 1e-5);
  }
}

TEST_CASE("device paths: batch normalisation, its gradient, running statistics and inference equal the CPU kernels") {
  at::manual_seed(12);
  const at::Tensor x = at::randn({6, 5, 4, 7}), w = at::rand({5}) + 0.5, b = at::randn({5});
  CHECK(worstDifference("batch_norm", conv_device::batchNorm, {x, w, b}, {{"eps", 1e-5}}) < 1e-5);
  Expected<std::vector<at::Tensor>> forward = callOp("batch_norm", std::vector<at::Tensor>{x, w, b}, {{"eps", 1e-5}});
  REQUIRE(forward.ok());
  const at::Tensor gy = at::randn(x.sizes());
  CHECK(worstDifference("batch_norm_backward", conv_device::batchNormBackward,
                        {gy, x, (*forward)[1], (*forward)[2], w}, {}) < 1e-5);
  CHECK(worstDifference("batch_norm_inference", conv_device::batchNormInference,
                        {x, w, b, at::randn({5}), at::rand({5}) + 0.5}, {{"eps", 1e-5}}) < 1e-5);
}

TEST_CASE("device paths: the running-statistics update matches the CPU kernel in place") {
  for (const ir::AttrMap& attrs : {ir::AttrMap{{"momentum", 0.1}}, ir::AttrMap{{"momentum", 0.0}, {"cumulative", true}}}) {
    CAPTURE(attrs.count("cumulative"));
    at::manual_seed(13);
    const at::Tensor mean = at::randn({5}), var = at::rand({5});
    at::Tensor rmCpu = at::randn({5}), rvCpu = at::rand({5}), trackedCpu = at::full({}, 3, at::kLong);
    at::Tensor rmDev = rmCpu.clone(), rvDev = rvCpu.clone(), trackedDev = trackedCpu.clone();
    REQUIRE(callOp("running_stats_update", std::vector<at::Tensor>{rmCpu, rvCpu, trackedCpu, mean, var}, attrs).ok());
    ir::Graph graph("device_path");
    std::vector<ir::Value*> values;
    for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&rmDev, &rvDev, &trackedDev, &mean, &var})
      values.push_back(graph.addInput("x" + std::to_string(values.size()), typeOf(*t)));
    Expected<ir::Node*> node = graph.create("running_stats_update", values, attrs);
    REQUIRE(node.ok());
    const std::vector<at::Tensor> operands{rmDev, rvDev, trackedDev, mean, var};
    const RunContext ctx;
    conv_device::runningStatsUpdate(KernelArgs{**node, operands, ctx});
    CHECK(at::allclose(rmCpu, rmDev, 1e-6, 1e-7));
    CHECK(at::allclose(rvCpu, rvDev, 1e-6, 1e-7));
    CHECK(trackedDev.item<std::int64_t>() == 4);
    CHECK(trackedCpu.item<std::int64_t>() == 4);
  }
}

}  // namespace gradc::runtime
