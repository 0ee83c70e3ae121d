// The CUDA device against the CPU device: the same op on the same operands gives the CPU's
// result -- bit for bit where the arithmetic is integer or exactly specified (dropout's masks,
// copies), within a stated tolerance where the GPU's kernels sum in another order (TF32 off).
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "ir/kernel_target.h"
#include "ir/op_table.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/backends/device_select.h"
#include "runtime/exec/executor.h"


// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's.
#undef CHECK
#include <doctest/doctest.h>

namespace gradc::runtime {
namespace {

const Device& gpu() {
  Expected<const Device*> d = cudaDevice(0);
  REQUIRE_MESSAGE(d.ok(), (d.ok() ? "" : d.error().message));
  return **d;
}

at::Tensor onGpu(const at::Tensor& t) { return t.to(at::Device(at::kCUDA, 0)); }

// The run every case uses: the same seed and step (dropout's keys) on either device.
RunContext contextOn(const Device* device) {
  RunContext ctx;
  ctx.seed = 1234;
  ctx.step = 7;
  ctx.device = device;
  return ctx;
}

std::vector<at::Tensor> run(std::string_view op, const std::vector<at::Tensor>& operands, const ir::AttrMap& attrs,
                            const Device* device) {
  std::vector<at::Tensor> in;
  for (const at::Tensor& t : operands) in.push_back(device ? onGpu(t) : t);
  Expected<std::vector<at::Tensor>> out = callOp(op, in, attrs, contextOn(device));
  REQUIRE_MESSAGE(out.ok(), (std::string(op) + ": " + (out.ok() ? "" : out.error().message)));
  std::vector<at::Tensor> host;
  for (const at::Tensor& t : *out) host.push_back(t.cpu());
  return host;
}

// max |gpu - cpu| / max(1, max |cpu|) over every result.
double relativeError(const std::vector<at::Tensor>& cpu, const std::vector<at::Tensor>& gpu) {
  REQUIRE(cpu.size() == gpu.size());
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const at::Tensor a = cpu[i].to(at::kDouble), b = gpu[i].to(at::kDouble);
    const double scale = std::max(1.0, a.abs().max().item<double>());
    worst = std::max(worst, (a - b).abs().max().item<double>() / scale);
  }
  return worst;
}


// Bytes ATen allocated beside the operands and results while the op ran on the GPU, and what a
// plan made for CUDA declares as its workspace.
struct DeviceWorkspace {
  std::int64_t used = 0, declared = 0;
};

DeviceWorkspace measureOnGpu(std::string_view op, const std::vector<at::Tensor>& operands, const ir::AttrMap& attrs,
                             const Device& d) {
  std::vector<at::Tensor> in;
  for (const at::Tensor& t : operands) in.push_back(onGpu(t));
  d.resetInternalPeak();
  const std::int64_t before = d.internalBytes();
  Expected<std::vector<at::Tensor>> out = callOp(op, in, attrs, contextOn(&d));
  REQUIRE_MESSAGE(out.ok(), (std::string(op) + ": " + (out.ok() ? "" : out.error().message)));
  std::int64_t results = 0;
  std::vector<ir::TensorType> inTypes, outTypes;
  auto typeOf = [](const at::Tensor& t) {
    return ir::TensorType{t.scalar_type() == at::kDouble ? ir::DType::f64 : ir::DType::f32,
                          ir::Shape(t.sizes().begin(), t.sizes().end())};
  };
  for (const at::Tensor& t : in) inTypes.push_back(typeOf(t));
  for (const at::Tensor& t : *out) {
    results += static_cast<std::int64_t>((t.nbytes() + 511) / 512 * 512);
    outTypes.push_back(typeOf(t));
  }
  DeviceWorkspace w;
  w.used = d.internalPeakBytes() - before - results;
  w.declared = ir::opWorkspaceBytes(*ir::findOp(op), inTypes, attrs, outTypes, ir::KernelSetting{1, ir::findKernelTarget("cuda")});
  return w;
}
}  // namespace

TEST_CASE("cuda: a GPU is visible, and --device cuda and auto select it") {
  Expected<int> gpus = visibleCudaDevices();
  REQUIRE_MESSAGE(gpus.ok(), (gpus.ok() ? "" : gpus.error().message));
  CHECK(*gpus >= 1);
  Expected<const Device*> cuda = selectDevice(DeviceChoice{findBackend("cuda")}, 0);
  REQUIRE(cuda.ok());
  CHECK((*cuda)->name() == "cuda:0");
  CHECK(!(*cuda)->isHost());
  Expected<const Device*> automatic = selectDevice(DeviceChoice{}, 0);
  REQUIRE(automatic.ok());
  CHECK(*automatic == *cuda);
  CHECK(!selectDevice(DeviceChoice{findBackend("cuda")}, *gpus).ok());  // a local rank without a GPU of its own
}

TEST_CASE("cuda: the arena is one device block, outside ATen's allocator") {
  const Device& d = gpu();
  const std::int64_t before = d.internalBytes();
  Expected<DeviceMemory> block = d.allocate(std::int64_t{64} << 20);
  REQUIRE(block.ok());
  CHECK(reinterpret_cast<std::uintptr_t>(block->get()) % kArenaAlignment == 0);
  CHECK(d.internalBytes() == before);  // cudaMalloc, not the caching allocator
  at::Tensor view = at::from_blob(block->get(), {16}, d.options(ir::DType::f32));
  view.fill_(2.5f);
  CHECK(view.sum().item<float>() == 40.0f);
  CHECK(!d.allocate(std::int64_t{1} << 50).ok());  // a petabyte: an Error, not an abort
}

TEST_CASE("cuda: ATen's own allocations are counted as the device's internal bytes") {
  const Device& d = gpu();
  d.resetInternalPeak();
  const std::int64_t before = d.internalBytes();
  {
    at::Tensor t = at::empty({1 << 20}, d.options(ir::DType::f32));
    CHECK(d.internalBytes() - before >= (std::int64_t{4} << 20));
  }
  CHECK(d.internalPeakBytes() - before >= (std::int64_t{4} << 20));
}

TEST_CASE("cuda: dropout draws the CPU's mask, bit for bit, in every element type") {
  const Device& d = gpu();
  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    CAPTURE(type);
    at::manual_seed(3);
    const at::Tensor x = at::randn({333, 129}).to(type);
    const ir::AttrMap attrs{{"p", 0.3}, {"rng", std::int64_t{11}}, {"rng_offset", std::int64_t{5}}};
    const std::vector<at::Tensor> cpu = run("dropout", {x}, attrs, nullptr);
    const std::vector<at::Tensor> cuda = run("dropout", {x}, attrs, &d);
    CHECK(at::equal(cpu[0], cuda[0]));
    CHECK(at::equal(cpu[0].eq(0), cuda[0].eq(0)));
  }
}

TEST_CASE("cuda: softmax backward along any axis, in every element type, allocates nothing beside its result") {
  const Device& d = gpu();
  at::manual_seed(9);
  const at::Tensor x = at::randn({3, 5, 7, 300}, at::kDouble);
  for (at::ScalarType type : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16}) {
    for (std::int64_t dim : {3, 1, 0, -1}) {
      CAPTURE(type);
      CAPTURE(dim);
      const at::Tensor y = at::softmax(x, dim).to(type), g = at::randn(x.sizes(), at::kDouble).to(type);
      const at::Tensor yd = y.to(at::kDouble), gd = g.to(at::kDouble);
      const at::Tensor expected = yd * (gd - (gd * yd).sum(dim, /*keepdim=*/true));
      const std::vector<at::Tensor> got = run("softmax_backward", {g, y}, {{"dim", dim}}, &d);
      REQUIRE((got[0].scalar_type() == type));
      const double tolerance = type == at::kHalf ? 2e-3 : type == at::kBFloat16 ? 1.6e-2 : type == at::kFloat ? 1e-6 : 1e-12;
      CHECK(relativeError({expected}, {got[0]}) < tolerance);
    }
  }
  // The device kernel itself, on operands already there: not one byte from ATen's allocator but
  // its result's (ATen's CUDA softmax backward allocates grad * y, the operand's size, too).
  const at::Tensor y = onGpu(at::softmax(at::randn({64, 1024}), 1)), g = onGpu(at::randn({64, 1024}));
  d.synchronize();
  d.resetInternalPeak();
  const std::int64_t before = d.internalBytes();
  const std::vector<at::Tensor> out = run("softmax_backward", {g, y}, {{"dim", std::int64_t{1}}}, &d);
  d.synchronize();
  CHECK(d.internalPeakBytes() == before + static_cast<std::int64_t>(out[0].nbytes()));
  CHECK(relativeError({(y * (g - (g * y).sum(1, true))).cpu()}, {out[0].cpu()}) < 1e-6);
}

TEST_CASE("cuda: the kernels that loop on the host take ATen's device path, with the CPU's results") {
  const Device& d = gpu();
  at::manual_seed(5);
  const at::Tensor logits = at::randn({24, 37});
  const at::Tensor target = at::randint(0, 37, {24}, at::kLong).index_put_({at::tensor({3, 9})}, at::scalar_tensor(-1, at::kLong));
  const ir::AttrMap smoothing{{"label_smoothing", 0.1}, {"ignore_index", std::int64_t{-1}}};
  struct Case {
    std::string op;
    std::vector<at::Tensor> operands;
    ir::AttrMap attrs;
  };
  const at::Tensor images = at::randn({4, 6, 9, 9}), weight = at::randn({8, 3, 3, 3});
  const ir::AttrMap window{{"stride", std::vector<std::int64_t>{2, 1}},
                           {"padding", std::vector<std::int64_t>{1, 1}},
                           {"dilation", std::vector<std::int64_t>{1, 1}},
                           {"groups", std::int64_t{2}}};
  const std::vector<at::Tensor> conv = run("conv2d", {images, weight}, window, nullptr);
  ir::AttrMap inputGrad = window, weightGrad = window;
  inputGrad["input_shape"] = std::vector<std::int64_t>{4, 6, 9, 9};
  weightGrad["weight_shape"] = std::vector<std::int64_t>{8, 3, 3, 3};
  const at::Tensor gy = at::randn(conv[0].sizes());
  const at::Tensor bnX = at::randn({5, 7, 4, 3}), bnW = at::rand({7}), bnB = at::randn({7});
  const std::vector<at::Tensor> bn = run("batch_norm", {bnX, bnW, bnB}, {{"eps", 1e-5}}, nullptr);
  const std::vector<Case> cases{
      {"cross_entropy", {logits, target}, smoothing},
      {"cross_entropy_backward", {at::scalar_tensor(0.5), logits, target}, smoothing},
      {"conv2d", {images, weight}, window},
      {"conv2d_input_grad", {gy, weight}, inputGrad},
      {"conv2d_weight_grad", {gy, images}, weightGrad},
      {"batch_norm", {bnX, bnW, bnB}, {{"eps", 1e-5}}},
      {"batch_norm_backward", {at::randn(bnX.sizes()), bnX, bn[1], bn[2], bnW}, {}},
      {"batch_norm_inference", {bnX, bnW, bnB, at::randn({7}), at::rand({7}) + 0.5}, {{"eps", 1e-5}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.op);
    const double error = relativeError(run(c.op, c.operands, c.attrs, nullptr), run(c.op, c.operands, c.attrs, &d));
    CHECK(error < 1e-5);  // f32, TF32 off: the GPU sums in another order
  }
}

TEST_CASE("cuda: attention runs ATen's fused kernel, with the host's results, forward and backward") {
  const Device& d = gpu();
  // 100 queries: the fused kernel's log-sum-exp rows are padded to 128; causal and not; a
  // 3-dimensional case; and shared key/value heads (grouped-query), which take the portable path.
  struct Case {
    std::vector<std::int64_t> q, kv;
    bool causal;
  };
  for (const Case& c : {Case{{2, 4, 100, 32}, {2, 4, 100, 32}, true}, Case{{2, 4, 100, 32}, {2, 4, 60, 32}, false},
                        Case{{3, 37, 16}, {3, 37, 16}, true}, Case{{2, 4, 64, 16}, {2, 1, 64, 16}, true}}) {
    CAPTURE(c.q.size());
    CAPTURE(c.causal);
    const at::Tensor q = at::randn(c.q), k = at::randn(c.kv), v = at::randn(c.kv);
    const ir::AttrMap attrs{{"causal", c.causal}, {"scale", 0.125}};
    const std::vector<at::Tensor> host = run("attention", {q, k, v}, attrs, nullptr);
    const std::vector<at::Tensor> dev = run("attention", {q, k, v}, attrs, &d);
    CHECK(relativeError(host, dev) < 1e-5);
    const at::Tensor dout = at::randn(host[0].sizes());
    const std::vector<at::Tensor> backward{dout, q, k, v, host[0], host[1]};
    CHECK(relativeError(run("attention_backward", backward, attrs, nullptr),
                        run("attention_backward", backward, attrs, &d)) < 1e-4);
  }
}

TEST_CASE("cuda: attention's composed path (dropout, shared heads, f64) equals the host's, within its workspace") {
  const Device& d = gpu();
  // Dropout draws gradc's mask on the GPU at the unfused op's positions, so the host's tiled
  // kernel and the GPU's blocks drop the same elements. The last case takes the fused kernel:
  // its declared workspace is checked too.
  struct Case {
    std::vector<std::int64_t> q, kv;
    bool causal;
    double p;
    at::ScalarType dtype;
  };
  for (const Case& c : {Case{{2, 4, 100, 32}, {2, 1, 100, 32}, true, 0.3, at::kFloat},
                        Case{{2, 4, 70, 16}, {2, 4, 90, 16}, false, 0.5, at::kFloat},
                        Case{{2, 2, 50, 8}, {2, 2, 50, 8}, true, 0.0, at::kDouble},
                        Case{{2, 2, 50, 8}, {2, 1, 50, 8}, true, 0.2, at::kDouble},
                        Case{{2, 4, 96, 32}, {2, 4, 96, 32}, true, 0.0, at::kFloat}}) {
    CAPTURE(c.p);
    CAPTURE(c.q[2]);
    const auto opts = at::TensorOptions().dtype(c.dtype);
    const at::Tensor q = at::randn(c.q, opts), k = at::randn(c.kv, opts), v = at::randn(c.kv, opts);
    ir::AttrMap attrs{{"causal", c.causal}, {"scale", 0.125}};
    if (c.p > 0) {
      attrs["p"] = c.p;
      attrs["rng"] = std::int64_t{6};
    }
    const double tol = c.dtype == at::kDouble ? 1e-12 : 1e-5;
    const std::vector<at::Tensor> host = run("attention", {q, k, v}, attrs, nullptr);
    CHECK(relativeError(host, run("attention", {q, k, v}, attrs, &d)) < tol);
    const at::Tensor dout = at::randn(host[0].sizes(), opts);
    const std::vector<at::Tensor> backward{dout, q, k, v, host[0], host[1]};
    CHECK(relativeError(run("attention_backward", backward, attrs, nullptr),
                        run("attention_backward", backward, attrs, &d)) < 10 * tol);
    const DeviceWorkspace fwd = measureOnGpu("attention", {q, k, v}, attrs, d);
    const DeviceWorkspace bwd = measureOnGpu("attention_backward", backward, attrs, d);
    MESSAGE("forward " << fwd.used << " of " << fwd.declared << " B declared, backward " << bwd.used << " of "
                       << bwd.declared);
    CHECK(fwd.used <= fwd.declared);
    CHECK(bwd.used <= bwd.declared);
  }
}

}  // namespace gradc::runtime
