// Gradient rules of the convolution, pooling and batch-norm ops (ir/ops_conv.cpp,
// ir/ops_batch_norm.cpp); entries of the table in passes/grad_rules.cpp.
#include <vector>

#include "passes/grad_rules.h"

namespace gradc::passes::conv_rules {

namespace {

// The window attributes a backward op shares with its forward node.
ir::AttrMap windowAttrs(const ir::Node& node, std::initializer_list<const char*> keys) {
  ir::AttrMap attrs;
  for (const char* key : keys)
    if (auto it = node.attrs().find(key); it != node.attrs().end()) attrs.emplace(it->first, it->second);
  return attrs;
}

}  // namespace

// conv2d(x, w[, b]): gx = conv2d_input_grad(g, w), gw = conv2d_weight_grad(g, x), gb = the sum of
// g over (N, OH, OW). Only the gradients the loss needs are built: the first layer's input
// (the images) gets none, which skips the largest col2im of the network.
OperandGrads gradConv2d(GradBuilder& b) {
  ir::Value* g = b.grad();
  OperandGrads grads(b.numOperands(), nullptr);
  const std::initializer_list<const char*> window{"stride", "padding", "dilation", "groups"};
  if (b.needs(0)) {
    ir::AttrMap attrs = windowAttrs(b.node(), window);
    attrs["input_shape"] = b.operandType(0).shape;
    grads[0] = b.emit1("conv2d_input_grad", {g, b.operand(1)}, std::move(attrs));
  }
  if (b.needs(1)) {
    ir::AttrMap attrs = windowAttrs(b.node(), window);
    attrs["weight_shape"] = b.operandType(1).shape;
    grads[1] = b.emit1("conv2d_weight_grad", {g, b.operand(0)}, std::move(attrs));
  }
  if (b.numOperands() == 3 && b.needs(2))
    grads[2] = b.emit1("sum", {g}, {{"dims", std::vector<std::int64_t>{0, 2, 3}}, {"keepdim", false}});
  return grads;
}

// batch_norm: only y is differentiable; mean, invstd and var feed backward and the running
// statistics.
OperandGrads gradBatchNorm(GradBuilder& b) {
  for (size_t r = 1; r < b.node().numResults(); ++r)
    if (b.grad(r)) {
      b.fail("the loss depends on batch_norm's statistics; only its first result (y) is differentiable");
      return {};
    }
  ir::Node* n = b.emit("batch_norm_backward", {b.grad(), b.operand(0), b.result(1), b.result(2), b.operand(1)});
  if (!n) return {};
  return {b.needs(0) ? n->result(0) : nullptr, b.needs(1) ? n->result(1) : nullptr,
          b.needs(2) ? n->result(2) : nullptr};
}

// max_pool2d: the gradient flows to each window's maximum, found by the saved indices.
OperandGrads gradMaxPool2d(GradBuilder& b) {
  if (b.grad(1)) {
    b.fail("the loss depends on max_pool2d's indices; only its first result is differentiable");
    return {};
  }
  ir::AttrMap attrs = windowAttrs(b.node(), {"kernel", "stride", "padding", "dilation", "ceil_mode"});
  attrs["input_shape"] = b.operandType(0).shape;
  return {b.emit1("max_pool2d_backward", {b.grad(), b.result(1)}, std::move(attrs))};
}

OperandGrads gradAvgPool2d(GradBuilder& b) {
  ir::AttrMap attrs = windowAttrs(b.node(), {"kernel", "stride", "padding", "ceil_mode", "count_include_pad"});
  attrs["input_shape"] = b.operandType(0).shape;
  return {b.emit1("avg_pool2d_backward", {b.grad()}, std::move(attrs))};
}

OperandGrads gradAdaptiveAvgPool2d(GradBuilder& b) {
  return {b.emit1("adaptive_avg_pool2d_backward", {b.grad()}, {{"input_shape", b.operandType(0).shape}})};
}

}  // namespace gradc::passes::conv_rules
