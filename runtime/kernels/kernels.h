// Kernel table: the kernels of the IR's ops, keyed by (op, device).
//
// Two layers. The portable kernels are ATen calls that run on any device, one per op (except
// the ops only a device's own kernel can run: dropout, whose counter-based mask no ATen call
// draws, and fused, which runs generated code). A device's own kernels (Device::kernels(),
// runtime/device/device.h) come first for the ops they cover: the host's loops over raw pointers, its
// oneDNN and OpenBLAS calls and the generated CPU code (hostKernels()); a GPU's CUDA kernels
// (runtime/cuda/cuda_kernels.h). So a device path is a registration, never a branch on where a
// tensor lives inside a kernel, and the portable kernel of an op the host overrides runs on the
// CPU as well, where the tests compare the two (tests/runtime/device_paths_test.cpp).
//
// Conventions every kernel follows:
//  - Results have exactly the IR result type (dtype and shape); the executor checks this
//    after every node and reports a mismatch as a kernel bug naming the node.
//  - ATen's own kernels are used wherever one exists, so results track PyTorch (and the
//    parity tests can compare against LibTorch autograd with tight tolerances).
//  - View ops (the op table's `view` flag: reshape when the strides allow it, transpose,
//    slice, select, split, unbind) return ATen views, not copies: every ATen kernel used
//    here accepts strided inputs, so materialising them would only cost memory and time.
//    Every other kernel returns fresh, contiguous storage (also sum_to when nothing was
//    broadcast and dropout with p = 0 copy), which the executor checks, so the memory
//    planner's aliasing model (passes/memory/storage.h) is exact.
//    Memory consequences, for whoever plans or measures memory: a view costs no bytes of
//    its own but keeps its base's whole buffer alive until the view dies (a select of one
//    row pins the full tensor; the parts of a split share one buffer until the last part
//    dies). A consumer that cannot use a view's strides copies it internally: at::matmul
//    does so when a transposed operand's batch dims cannot be merged (e.g. [B, T, H, D]
//    transposed to [B, H, T, D]), and when batch dims broadcast it copies the expanded
//    operand.
//  - Operands are never modified, except the updated operands of optimizer steps (and the
//    gradient an optimizer step scales in place when clipping: the step is its last use).
//  - Results go where the executor says (KernelArgs::outs): with a memory plan, every non-view
//    result has a contiguous tensor of exactly its IR type at its planned offset in the rank's
//    arena, and the kernel writes there (ATen `_out` variants, or its own loop); the executor
//    checks it did. resultBuffer() gives that tensor, or a fresh one when there is no plan
//    (GRADC_NO_ARENA=1, callOp), so both paths run the same arithmetic and give the same bits.
//    What a kernel still allocates (ATen's internal temporaries) is workspace: outside the
//    arena, tracked, and bounded by the op table's declared workspace (a test checks it).
//  - Tensors a kernel creates take their options from the rank's device (RunContext::device),
//    never from a CPU constant.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <array>
#include <span>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "runtime/core/counter_rng.h"

namespace gradc::runtime {

class CollectiveContext;  // runtime/comm/collective_context.h
class Device;             // runtime/device/device.h
class StepScalars;        // runtime/core/step_scalars.h

// What varies between runs of one compiled graph.
struct RunContext {
  std::uint64_t seed = 0;  // run seed: keys the counter-based RNG together with step and node
  std::int64_t step = 1;   // 1-based training step
  // The rank's communication state; needed by graphs with collective ops (data parallelism).
  CollectiveContext* collectives = nullptr;
  // Where tensors live; nullptr: the CPU.
  const Device* device = nullptr;
  // The step's 0-dim operands read on the host, once each (Executor::run makes one per run);
  // nullptr: each read by its reader.
  StepScalars* scalars = nullptr;
};

// A node's generated kernel (runtime/kernels/generated_kernels.h), resolved once by the executor
// (Executor::setGeneratedKernels): the function and the node's constant kernel arguments.
struct GeneratedCall {
  void* fn = nullptr;                 // cast to the op's kernel ABI (FusedKernelFn, AdamwKernelFn)
  std::vector<std::int64_t> streams;  // fused nodes: (rng, rng_offset) per random step
};

struct KernelArgs {
  const ir::Node& node;
  std::span<const at::Tensor> operands;
  const RunContext& ctx;
  // One entry per result: the planned buffer to write (contiguous, exactly the result's IR
  // type), or undefined where the kernel allocates (views; every result without a plan).
  std::span<const at::Tensor> outs = {};
  // The node's generated kernel when one is loaded (fused nodes, one-pass AdamW); else nullptr.
  const GeneratedCall* generated = nullptr;
};

using KernelFn = std::vector<at::Tensor> (*)(const KernelArgs&);

struct KernelEntry {
  std::string_view op;
  KernelFn fn;
};

// The kernel `device` runs for an op: its own (Device::kernels()), else the portable one;
// nullptr when there is neither.
const KernelFn* findKernel(std::string_view opName, const Device& device);
// The host's kernel of an op (findKernel on the CPU device).
const KernelFn* findKernel(std::string_view opName);
// The portable kernel of an op; nullptr when it has none.
const KernelFn* findPortableKernel(std::string_view opName);

// The host's own kernels (CpuDevice::kernels()), gathered from the families' host parts below.
std::span<const KernelEntry> hostKernels();
std::span<const KernelEntry> hostForwardKernels();    // kernels_forward.cpp: dropout, products, losses
std::span<const KernelEntry> hostBackwardKernels();   // kernels_backward.cpp
std::span<const KernelEntry> hostOptimizerKernels();  // kernels_optimizer.cpp: one-pass AdamW
std::span<const KernelEntry> hostFusedLossKernels();  // kernels_fused_loss.cpp
std::span<const KernelEntry> hostTransformerKernels();  // kernels_transformer.cpp
std::span<const KernelEntry> hostConvKernels();       // kernels_conv.cpp: im2col/oneDNN, pooling
std::span<const KernelEntry> hostBatchNormKernels();  // kernels_batch_norm.cpp: per-channel loops
std::span<const KernelEntry> hostAttentionKernels();  // kernels_attention.cpp: the tiled kernels
std::span<const KernelEntry> hostLayerNormKernels();  // kernels_layer_norm.cpp: f32/f64 rows
std::span<const KernelEntry> hostSoftmaxKernels();    // kernels_softmax.cpp: f32/f64 rows
std::span<const KernelEntry> hostGeluKernels();       // kernels_gelu.cpp: exact GELU, f32
std::span<const KernelEntry> hostFusedKernels();      // kernels_fused.cpp: the generated CPU code

// The portable parts of the table (one entry per op each); findPortableKernel searches them.
std::span<const KernelEntry> forwardKernels();
std::span<const KernelEntry> backwardKernels();
std::span<const KernelEntry> optimizerKernels();
std::span<const KernelEntry> collectiveKernels();  // kernels_collective.cpp
// Layer norm and its backward for a device whose ATen kernels keep the statistics of f16/bf16
// data in f32 (CUDA): computed in f32, rounded into the IR's statistics, widened again for the
// backward. The device lists them among its own kernels.
std::span<const KernelEntry> layerNormF32StatisticsKernels();          // kernels_forward.cpp
std::span<const KernelEntry> layerNormBackwardF32StatisticsKernels();  // kernels_backward.cpp
std::span<const KernelEntry> fusedLossKernels();   // kernels_fused_loss.cpp
std::span<const KernelEntry> transformerKernels(); // kernels_transformer.cpp
std::span<const KernelEntry> convKernels();        // kernels_conv.cpp: convolution, pooling, batch norm
std::span<const KernelEntry> attentionKernels();   // kernels_attention.cpp: fused attention
std::span<const KernelEntry> convDeviceKernels();  // kernels_conv_device.cpp: ATen's convolution, batch norm

namespace kernel_detail {

// Attribute lookups for kernels. The verifier guarantees that required attributes exist
// with the schema's kind, so a missing one is a bug (asserted), not a user error.
std::int64_t intAttr(const ir::Node& node, std::string_view key);
double floatAttr(const ir::Node& node, std::string_view key);
std::vector<std::int64_t> intListAttr(const ir::Node& node, std::string_view key);
// An axis attribute normalised against `rank` (negative axes count from the end).
std::int64_t axisAttr(const ir::Node& node, std::string_view key, std::int64_t rank);
// The value of operand i, a 0-dim tensor (learning rate, step, gradient scale), on the host:
// through the run's StepScalars when it has one (one read per step), else read here.
double scalarOperand(const KernelArgs& a, size_t i);
// Tensor options for an IR dtype on the run's device.
at::TensorOptions optionsFor(const KernelArgs& a, ir::DType dtype);
// Where result `i` goes: its planned buffer (KernelArgs::outs), else an uninitialised
// contiguous tensor of its IR type on the run's device.
at::Tensor resultBuffer(const KernelArgs& a, size_t i = 0);

// What a dropout node draws, for the host's kernel and a device's alike: element i of the
// operand is kept when u(offset + i) of the node's counter-based stream is >= threshold (p
// rounded up to the generator's 2^-24 grid), and scaled by 1 / (1 - p). p = 0 copies.
struct DropoutMask {
  RngStream rng;
  std::int64_t offset = 0;
  float threshold = 0;
  double scale = 1;
  double p = 0;
};
DropoutMask dropoutMask(const KernelArgs& a);

// A fused node's buffers in its generated kernel's order (codegen/kernel_builder.h): its operands
// (each with the strides the node names, ir/fusedOperandStrides; else an error), then its
// results' planned buffers, which are appended to `results`.
std::vector<void*> fusedBuffers(const KernelArgs& a, std::vector<at::Tensor>& results);

// The nine scalars of a one-pass AdamW update (adamw_step {fused = true}, the generated kernels'
// ABI: codegen/optimizer_kernels.h): grad_scale, 1 - lr wd, beta1, 1 - beta1, beta2, 1 - beta2,
// sqrt(1 - beta2^step), eps, -lr / (1 - beta1^step), from the node and its step's scalars.
std::array<double, 9> adamwOnePassScalars(const KernelArgs& a);

// bf16 or f16: the types whose host kernels loop on their own where ATen 2.x would first
// convert a whole operand to a float copy (memory a plan does not hold).
inline bool reducedPrecision(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
}

// Calls body(T{}) with T the C++ type of a bf16 or f16 tensor.
template <class Body>
void withReducedType(at::ScalarType type, Body&& body) {
  if (type == at::kBFloat16) body(c10::BFloat16{});
  else body(c10::Half{});
}

}  // namespace kernel_detail
}  // namespace gradc::runtime
