#include "passes/grad_rules.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "ir/device_mesh.h"

namespace gradc::passes {

// ---- GradBuilder -------------------------------------------------------------------------------

GradBuilder::GradBuilder(ir::Graph& graph, const ir::Node& node, std::vector<ir::Value*> resultGrads,
                         std::vector<bool> needs)
    : graph_(graph), node_(node), resultGrads_(std::move(resultGrads)), needs_(std::move(needs)) {}

ir::Node* GradBuilder::emit(std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs) {
  if (error_) return nullptr;
  if (std::find(operands.begin(), operands.end(), nullptr) != operands.end()) return nullptr;
  Expected<ir::Node*> n = graph_.create(op, operands, std::move(attrs), ir::Phase::bwd, node_.specName());
  if (!n) {
    error_ = internalError("the gradient rule of '" + std::string(node_.opName()) + "'",
                           "it built an invalid node: " + n.error().message);
    return nullptr;
  }
  return *n;
}

ir::Value* GradBuilder::emit1(std::string_view op, std::vector<ir::Value*> operands, ir::AttrMap attrs) {
  ir::Node* n = emit(op, std::move(operands), std::move(attrs));
  return n ? n->result(0) : nullptr;
}

ir::Value* GradBuilder::sumTo(ir::Value* v, const ir::Shape& shape) {
  if (!v || v->type().shape == shape) return v;
  return emit1("sum_to", {v}, {{"shape", shape}});
}

ir::Value* GradBuilder::zeros(const ir::TensorType& type) {
  return emit1("full", {}, {{"shape", type.shape}, {"dtype", type.dtype}, {"value", 0.0}});
}

void GradBuilder::fail(std::string message) {
  if (!error_) error_ = Error{std::move(message)};
}

// ---- the rules ---------------------------------------------------------------------------------
//
// Notation: g = gradient of the (first) result, x/a/b = operands, y = the forward result.
// A rule only builds what needs() asks for; the pass ignores gradients of operands that need
// none, so returning one anyway would only waste a node.

namespace {

using ir::AttrMap;
using ir::Value;

std::int64_t i64(size_t v) { return static_cast<std::int64_t>(v); }

// add: d/da = d/db = 1; broadcast operands get the sum over the expanded axes.
OperandGrads gradAdd(GradBuilder& b) {
  Value* g = b.grad();
  return {b.needs(0) ? b.sumTo(g, b.operandType(0).shape) : nullptr,
          b.needs(1) ? b.sumTo(g, b.operandType(1).shape) : nullptr};
}

// sub: d/db = -1. The negation is applied after the reduction (fewer elements); negation is
// exact in IEEE arithmetic, so this is bit-identical to reducing the negated gradient.
OperandGrads gradSub(GradBuilder& b) {
  Value* g = b.grad();
  Value* gb = nullptr;
  if (b.needs(1)) gb = b.emit1("scale", {b.sumTo(g, b.operandType(1).shape)}, {{"factor", -1.0}});
  return {b.needs(0) ? b.sumTo(g, b.operandType(0).shape) : nullptr, gb};
}

// mul: d/da = b, d/db = a, each reduced to its operand's shape.
OperandGrads gradMul(GradBuilder& b) {
  Value* g = b.grad();
  Value* ga = b.needs(0) ? b.sumTo(b.emit1("mul", {g, b.operand(1)}), b.operandType(0).shape) : nullptr;
  Value* gb = b.needs(1) ? b.sumTo(b.emit1("mul", {g, b.operand(0)}), b.operandType(1).shape) : nullptr;
  return {ga, gb};
}

OperandGrads gradScale(GradBuilder& b) {
  return {b.emit1("scale", {b.grad()}, {{"factor", *ir::getFloat(b.node().attrs(), "factor")}})};
}

// Swaps the last two axes of v (rank >= 2).
Value* transposeLast2(GradBuilder& b, Value* v) {
  if (!v) return nullptr;
  std::int64_t r = v->type().rank();
  return b.emit1("transpose", {v}, {{"dim0", r - 2}, {"dim1", r - 1}});
}

// matmul: a[..., m, k] @ b[..., k, n] = y[batch, m, n] (batch = broadcast of both batch dims).
//   ga = g @ b^T : [batch, m, k], summed down to a's shape when a's batch dims were broadcast;
//   gb = a^T @ g : [batch, k, n], likewise. When b is a plain matrix and a is batched (a @ W),
//   gb is the contraction over every leading axis of a and g: linear_weight_grad(a, g) =
//   sum over leading dims of a^T g = [k, n] computes it without materialising [batch, k, n].
OperandGrads gradMatmul(GradBuilder& b) {
  Value* g = b.grad();
  const ir::TensorType& ta = b.operandType(0);
  const ir::TensorType& tb = b.operandType(1);
  Value* ga = nullptr;
  Value* gb = nullptr;
  if (b.needs(0)) ga = b.sumTo(b.emit1("matmul", {g, transposeLast2(b, b.operand(1))}), ta.shape);
  if (b.needs(1)) {
    if (tb.rank() == 2 && ta.rank() > 2)
      gb = b.emit1("linear_weight_grad", {b.operand(0), g});
    else
      gb = b.sumTo(b.emit1("matmul", {transposeLast2(b, b.operand(0)), g}), tb.shape);
  }
  return {ga, gb};
}

// linear: y[..., out] = x[..., in] @ w[out, in]^T + bias[out].
//   gx = g @ w : [..., out] @ [out, in] -> [..., in] (matmul broadcasts w over g's leading
//        axes). matmul needs rank >= 2, so a rank-1 g is viewed as [1, out] and the result
//        reshaped back to [in].
//   gw = linear_weight_grad(g, x) = sum over leading dims of g^T x : [out, in].
//   gbias = g summed over every axis but the last : [out].
OperandGrads gradLinear(GradBuilder& b) {
  Value* g = b.grad();
  const ir::TensorType& tx = b.operandType(0);
  OperandGrads grads(b.numOperands(), nullptr);
  if (b.needs(0)) {
    if (g->type().rank() >= 2) {
      grads[0] = b.emit1("matmul", {g, b.operand(1)});
    } else {
      std::int64_t out = g->type().shape[0];
      Value* row = b.emit1("reshape", {g}, {{"shape", ir::Shape{1, out}}});
      grads[0] = b.emit1("reshape", {b.emit1("matmul", {row, b.operand(1)})}, {{"shape", tx.shape}});
    }
  }
  if (b.needs(1)) grads[1] = b.emit1("linear_weight_grad", {g, b.operand(0)});
  if (b.numOperands() == 3 && b.needs(2)) grads[2] = b.sumTo(g, b.operandType(2).shape);
  return grads;
}

// embedding: rows gathered by index; the table's gradient scatters g back, summing rows of
// repeated indices. Indices are integers: no gradient.
OperandGrads gradEmbedding(GradBuilder& b) {
  std::int64_t num = b.operandType(0).shape[0];
  return {b.needs(0) ? b.emit1("embedding_backward", {b.grad(), b.operand(1)}, {{"num", num}}) : nullptr, nullptr};
}

// Elementwise activations whose backward kernel reads the forward output y.
template <const char* Op>
OperandGrads gradFromOutput(GradBuilder& b) {
  return {b.emit1(Op, {b.grad(), b.result()})};
}
constexpr char kReluBackward[] = "relu_backward";
constexpr char kTanhBackward[] = "tanh_backward";
constexpr char kSigmoidBackward[] = "sigmoid_backward";

// gelu reads the input x; the approximation mode must match the forward one.
OperandGrads gradGelu(GradBuilder& b) {
  AttrMap attrs;
  if (auto a = ir::getString(b.node().attrs(), "approximate")) attrs["approximate"] = *a;
  return {b.emit1("gelu_backward", {b.grad(), b.operand(0)}, std::move(attrs))};
}

// silu reads the input x.
OperandGrads gradSilu(GradBuilder& b) { return {b.emit1("silu_backward", {b.grad(), b.operand(0)})}; }

// exp: d/dx = e^x = y.
OperandGrads gradExp(GradBuilder& b) { return {b.emit1("mul", {b.grad(), b.result()})}; }

// rms_norm(x, w) -> (y, rstd): one backward kernel from the saved rstd gives (gx, gw); like
// layer_norm, only y is differentiable.
OperandGrads gradRmsNorm(GradBuilder& b) {
  if (b.grad(1)) {
    b.fail("the loss depends on rms_norm's rstd result; only its first result (y) is differentiable");
    return {};
  }
  ir::Node* n = b.emit("rms_norm_backward", {b.grad(), b.operand(0), b.result(1), b.operand(1)});
  if (!n) return {};
  return {n->result(0), n->result(1)};
}

// sum / mean: g (with the reduced axes restored as extents of 1) broadcast back over the input
// by adding it to zeros of the input's type; mean scales by 1 / count.
OperandGrads gradReduction(GradBuilder& b) {
  const ir::TensorType& x = b.operandType(0);
  std::vector<std::int64_t> dims = *ir::getIntList(b.node().attrs(), "dims");
  if (dims.empty())
    for (std::int64_t d = 0; d < x.rank(); ++d) dims.push_back(d);
  ir::Shape kept = x.shape;
  std::int64_t count = 1;
  for (std::int64_t d : dims) {
    count *= x.shape[static_cast<size_t>(d)];
    kept[static_cast<size_t>(d)] = 1;
  }
  Value* g = b.grad();
  if (g->type().shape != kept) g = b.emit1("reshape", {g}, {{"shape", kept}});
  if (b.node().opName() == "mean") g = b.emit1("scale", {g}, {{"factor", 1.0 / static_cast<double>(count)}});
  return {b.emit1("add", {b.zeros(x), g})};
}

// rope is a rotation per (position, pair): its adjoint rotates back by the same angle.
OperandGrads gradRope(GradBuilder& b) {
  AttrMap attrs = b.node().attrs();
  attrs["inverse"] = !ir::getBool(attrs, "inverse").value_or(false);
  return {b.emit1("rope", {b.grad()}, std::move(attrs))};
}

// softmax / log_softmax: backward kernels of the output y along the same dim.
template <const char* Op>
OperandGrads gradSoftmaxLike(GradBuilder& b) {
  return {b.emit1(Op, {b.grad(), b.result()}, {{"dim", *ir::getInt(b.node().attrs(), "dim")}})};
}
constexpr char kSoftmaxBackward[] = "softmax_backward";
constexpr char kLogSoftmaxBackward[] = "log_softmax_backward";

// layer_norm(x, w, bias) -> (y, mean, rstd): one fused backward kernel from the saved
// statistics gives (gx, gw, gbias). mean and rstd are saved for backward, not model outputs;
// a loss that depends on them directly is not supported (and is reported, never ignored).
OperandGrads gradLayerNorm(GradBuilder& b) {
  if (b.grad(1) || b.grad(2)) {
    b.fail("the loss depends on layer_norm's mean or rstd result; only its first result (y) is differentiable");
    return {};
  }
  ir::Node* n = b.emit("layer_norm_backward",
                       {b.grad(), b.operand(0), b.result(1), b.result(2), b.operand(1), b.operand(2)});
  if (!n) return {};
  return {n->result(0), n->result(1), n->result(2)};
}

// attention(q, k, v) -> (out, lse): one backward kernel recomputes the probabilities tile by
// tile from the saved lse (ir/ops_attention.cpp), with the forward's attributes, so its dropout
// mask is the forward's. lse is saved for the backward, not a model output; a loss that depends
// on it directly is not supported.
OperandGrads gradAttention(GradBuilder& b) {
  if (b.grad(1)) {
    b.fail("the loss depends on attention's log-sum-exp result; only its first result (the output) is differentiable");
    return {};
  }
  ir::Node* n = b.emit("attention_backward", {b.grad(), b.operand(0), b.operand(1), b.operand(2), b.result(0), b.result(1)},
                       b.node().attrs());
  if (!n) return {};
  OperandGrads out;
  for (size_t i = 0; i < 3; ++i) out.push_back(b.needs(i) ? n->result(i) : nullptr);
  return out;
}

// linear_cross_entropy(x, w, target[, bias]) -> (loss, gx, gw[, gbias]): the fused kernel
// computes the loss's gradients for an upstream gradient of 1 as it goes (ir/ops_fused_loss.cpp),
// so the rule only scales them by g. When g is the constant 1 (autodiff's seed: the loss is the
// graph's loss) they are the gradients as they are, and no copy is made. A loss that depends on
// the gradient results themselves is not supported.
bool isConstantOne(const Value* v) {
  const ir::Node* p = v->producer();
  if (!p || p->opName() != "full" || v->type().rank() != 0) return false;
  std::optional<double> value = ir::getFloat(p->attrs(), "value");
  return value && *value == 1.0;
}

OperandGrads gradLinearCrossEntropy(GradBuilder& b) {
  for (size_t r = 1; r < b.node().numResults(); ++r)
    if (b.grad(r)) {
      b.fail("the loss depends on linear_cross_entropy's gradient results; only its first result (the loss) is "
             "differentiable");
      return {};
    }
  Value* g = b.grad();
  const bool one = isConstantOne(g);
  auto scaled = [&](size_t operand, size_t result) -> Value* {
    if (!b.needs(operand)) return nullptr;
    return one ? b.result(result) : b.emit1("mul", {g, b.result(result)});
  };
  OperandGrads out{scaled(0, 1), scaled(1, 2), nullptr};
  if (b.numOperands() > 3) out.push_back(scaled(3, 3));
  return out;
}

// dropout: y = x * mask / (1 - p), so gx = g * mask / (1 - p) = dropout(g) drawn with the same
// attributes. The mask comes from the counter-based stream keyed by (seed, step, rng), which
// depends on neither the values nor the phase, so the backward node reproduces the forward
// mask bit for bit; that is why it reuses the forward node's rng key instead of a fresh one.
OperandGrads gradDropout(GradBuilder& b) { return {b.emit1("dropout", {b.grad()}, b.node().attrs())}; }

// causal_mask: masked positions were overwritten with -inf, so their gradient is zero.
OperandGrads gradCausalMask(GradBuilder& b) { return {b.emit1("causal_mask_backward", {b.grad()})}; }

OperandGrads gradReshape(GradBuilder& b) {
  return {b.emit1("reshape", {b.grad()}, {{"shape", b.operandType(0).shape}})};
}

// transpose swaps two axes, so it is its own inverse.
OperandGrads gradTranspose(GradBuilder& b) { return {b.emit1("transpose", {b.grad()}, b.node().attrs())}; }

OperandGrads gradSlice(GradBuilder& b) {
  AttrMap attrs = b.node().attrs();  // dim, start, end
  attrs["input_shape"] = b.operandType(0).shape;
  return {b.emit1("slice_backward", {b.grad()}, std::move(attrs))};
}

OperandGrads gradSelect(GradBuilder& b) {
  AttrMap attrs = b.node().attrs();  // dim, index
  attrs["input_shape"] = b.operandType(0).shape;
  return {b.emit1("select_backward", {b.grad()}, std::move(attrs))};
}

// split: the parts' gradients concatenated back along dim; a part the loss does not depend on
// contributes zeros of its type.
OperandGrads gradSplit(GradBuilder& b) {
  std::vector<Value*> parts;
  const ir::Node& n = b.node();
  for (size_t i = 0; i < n.numResults(); ++i) parts.push_back(b.grad(i) ? b.grad(i) : b.zeros(n.result(i)->type()));
  return {b.emit1("concat", std::move(parts), {{"dim", *ir::getInt(n.attrs(), "dim")}})};
}

// concat (the inverse of split; specs do not emit it, but hand-written graphs may): operand i
// gets its own extent of g along dim back.
OperandGrads gradConcat(GradBuilder& b) {
  OperandGrads grads(b.numOperands(), nullptr);
  std::int64_t dim = *ir::getInt(b.node().attrs(), "dim");
  int axis = *ir::normalizeAxis(dim, b.operandType(0).rank());
  std::int64_t start = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    std::int64_t end = start + b.operandType(i).shape[static_cast<size_t>(axis)];
    if (b.needs(i)) grads[i] = b.emit1("slice", {b.grad()}, {{"dim", dim}, {"start", start}, {"end", end}});
    start = end;
  }
  return grads;
}

// unbind (the inverse of stack): the results' gradients stacked back along dim; a result the
// loss does not depend on contributes zeros of its type.
OperandGrads gradUnbind(GradBuilder& b) {
  std::vector<Value*> parts;
  const ir::Node& n = b.node();
  for (size_t i = 0; i < n.numResults(); ++i) parts.push_back(b.grad(i) ? b.grad(i) : b.zeros(n.result(i)->type()));
  return {b.emit1("stack", std::move(parts), {{"dim", *ir::getInt(n.attrs(), "dim")}})};
}

// stack: operand i is the slice at index i of the new axis.
OperandGrads gradStack(GradBuilder& b) {
  OperandGrads grads(b.numOperands(), nullptr);
  std::int64_t dim = *ir::getInt(b.node().attrs(), "dim");
  for (size_t i = 0; i < grads.size(); ++i)
    if (b.needs(i)) grads[i] = b.emit1("select", {b.grad()}, {{"dim", dim}, {"index", i64(i)}});
  return grads;
}

// Constants: no operands, nothing to propagate.
OperandGrads gradNone(GradBuilder&) { return {}; }

// cross_entropy: the backward kernel recomputes softmax from the logits; targets are class
// indices, not differentiable.
OperandGrads gradCrossEntropy(GradBuilder& b) {
  if (!b.needs(0)) return {nullptr, nullptr};
  AttrMap attrs;
  if (auto ignore = ir::getInt(b.node().attrs(), "ignore_index")) attrs["ignore_index"] = *ignore;
  if (auto eps = ir::getFloat(b.node().attrs(), "label_smoothing")) attrs["label_smoothing"] = *eps;
  return {b.emit1("cross_entropy_backward", {b.grad(), b.operand(0), b.operand(1)}, std::move(attrs)), nullptr};
}

// mse = mean((a - t)^2): ga = g * 2 (a - t) / count, and gt = -ga.
OperandGrads gradMse(GradBuilder& b) {
  Value* ga = b.emit1("mse_backward", {b.grad(), b.operand(0), b.operand(1)});
  Value* gt = b.needs(1) ? b.emit1("scale", {ga}, {{"factor", -1.0}}) : nullptr;
  return {ga, gt};
}

// gather (data parallelism, loss placement gather, on the root rank): the gradient of the
// gathered predictions is scattered back, each rank receiving the rows it sent. The scatter is
// the collective after the gather (seq + 1). At most one operand may need a gradient, so that
// every rank issues exactly one scatter.
OperandGrads gradGather(GradBuilder& b) {
  OperandGrads grads(b.numOperands(), nullptr);
  const ir::AttrMap& a = b.node().attrs();
  size_t differentiable = 0;
  for (size_t i = 0; i < b.numOperands(); ++i) {
    if (!b.needs(i) || !b.grad(i)) continue;
    if (++differentiable > 1) b.fail("gather of more than one differentiable tensor is not supported");
    grads[i] = b.emit1("scatter", {b.grad(i)},
                       {{"world", *ir::getInt(a, "world")}, {"root", *ir::getInt(a, "root")},
                        {"seq", *ir::getInt(a, "seq") + 1}, {"group", std::string(ir::collectiveGroup(b.node()))}});
  }
  return grads;
}

// gather_send (the other ranks' half of gather): their share of the gradient comes back from
// the root's scatter. The result (the f32[] stand-in loss) orders the receive into the backward.
OperandGrads gradGatherSend(GradBuilder& b) {
  OperandGrads grads(b.numOperands(), nullptr);
  const ir::AttrMap& a = b.node().attrs();
  size_t differentiable = 0;
  for (size_t i = 0; i < b.numOperands(); ++i) {
    if (!b.needs(i)) continue;
    if (++differentiable > 1) b.fail("gather of more than one differentiable tensor is not supported");
    grads[i] = b.emit1("scatter_recv", {b.grad()},
                       {{"world", *ir::getInt(a, "world")}, {"root", *ir::getInt(a, "root")},
                        {"seq", *ir::getInt(a, "seq") + 1}, {"group", std::string(ir::collectiveGroup(b.node()))},
                        {"shape", b.operandType(i).shape},
                        {"dtype", b.operandType(i).dtype}});
  }
  return grads;
}

struct RuleEntry {
  std::string_view op;
  GradRule rule;
};

// The table: one entry per differentiable op, sorted by name (a test checks the order).
constexpr RuleEntry kRules[] = {
    {"adaptive_avg_pool2d", conv_rules::gradAdaptiveAvgPool2d},
    {"add", gradAdd},
    {"attention", gradAttention},
    {"avg_pool2d", conv_rules::gradAvgPool2d},
    {"batch_norm", conv_rules::gradBatchNorm},
    {"causal_mask", gradCausalMask},
    {"concat", gradConcat},
    {"conv2d", conv_rules::gradConv2d},
    {"cross_entropy", gradCrossEntropy},
    {"dropout", gradDropout},
    {"embedding", gradEmbedding},
    {"exp", gradExp},
    {"full", gradNone},
    {"gather", gradGather},
    {"gather_send", gradGatherSend},
    {"gelu", gradGelu},
    {"layer_norm", gradLayerNorm},
    {"linear", gradLinear},
    {"linear_cross_entropy", gradLinearCrossEntropy},
    {"log_softmax", gradSoftmaxLike<kLogSoftmaxBackward>},
    {"matmul", gradMatmul},
    {"max_pool2d", conv_rules::gradMaxPool2d},
    {"mean", gradReduction},
    {"mse", gradMse},
    {"mul", gradMul},
    {"relu", gradFromOutput<kReluBackward>},
    {"reshape", gradReshape},
    {"rms_norm", gradRmsNorm},
    {"rope", gradRope},
    {"scale", gradScale},
    {"select", gradSelect},
    {"sigmoid", gradFromOutput<kSigmoidBackward>},
    {"silu", gradSilu},
    {"slice", gradSlice},
    {"softmax", gradSoftmaxLike<kSoftmaxBackward>},
    {"split", gradSplit},
    {"stack", gradStack},
    {"sub", gradSub},
    {"sum", gradReduction},
    {"tanh", gradFromOutput<kTanhBackward>},
    {"transpose", gradTranspose},
    {"unbind", gradUnbind},
    {"zeros", gradNone},
};

}  // namespace

GradRule findGradRule(std::string_view opName) {
  for (const RuleEntry& e : kRules)
    if (e.op == opName) return e.rule;
  return nullptr;
}

std::vector<std::string_view> gradRuleOps() {
  std::vector<std::string_view> names;
  for (const RuleEntry& e : kRules) names.push_back(e.op);
  return names;
}

}  // namespace gradc::passes
