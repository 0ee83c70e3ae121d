// conv2d's kernels on oneDNN (see onednn_conv.h).
#include "runtime/kernels/onednn_conv.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include "runtime/host/host_conv_problem.h"

namespace gradc::runtime {

namespace {

ir::Shape shapeOf(const at::Tensor& t) { return ir::Shape(t.sizes().begin(), t.sizes().end()); }
ir::TensorType typeOf(const at::Tensor& t) { return {ir::DType::f32, shapeOf(t)}; }

}  // namespace

bool oneDnnConv2d(const KernelArgs& a, onednn::ConvPass pass, const at::Tensor& result) {
  const at::Tensor& first = a.operands[0];
  if (first.scalar_type() != at::kFloat) return false;  // host tensors: only host kernels call this
  // The operands in the layout the op reads (contiguous: strided ones are the planner's copies).
  const at::Tensor op0 = first.contiguous(), op1 = a.operands[1].contiguous();
  const bool bias = pass == onednn::ConvPass::Forward && a.operands.size() == 3;
  const at::Tensor b = bias ? a.operands[2].contiguous() : at::Tensor();
  onednn::ConvBuffers buffers;
  const at::Tensor* x = nullptr;
  const at::Tensor* w = nullptr;
  const at::Tensor* y = nullptr;
  switch (pass) {
    case onednn::ConvPass::Forward:  // (x, w[, bias]) -> y
      x = &op0, w = &op1, y = &result;
      buffers = {.x = op0.data_ptr(), .w = op1.data_ptr(), .bias = bias ? b.data_ptr() : nullptr, .y = result.data_ptr()};
      break;
    case onednn::ConvPass::InputGrad:  // (gy, w) -> gx
      x = &result, w = &op1, y = &op0;
      buffers = {.w = op1.data_ptr(), .gy = op0.data_ptr(), .gx = result.data_ptr()};
      break;
    case onednn::ConvPass::WeightGrad:  // (gy, x) -> gw
      x = &op1, w = &result, y = &op0;
      buffers = {.x = op1.data_ptr(), .gy = op0.data_ptr(), .gw = result.data_ptr()};
      break;
  }
  const int threads = at::get_num_threads();
  const std::optional<host::OneDnnConvPass> chosen =
      host::oneDnnConvPass(a.node.attrs(), pass, typeOf(*x), typeOf(*w), typeOf(*y), bias, threads);
  const std::int64_t declared = a.node.workspaceBytes(threads);
  if (!chosen || chosen->chunking.workspaceBytes > declared) return false;
  at::Tensor workspace = at::empty({declared}, first.options().dtype(at::kByte));
  return onednn::runConv(chosen->shape, pass, chosen->chunking.chunk, buffers, workspace.data_ptr(), declared).empty();
}

}  // namespace gradc::runtime
