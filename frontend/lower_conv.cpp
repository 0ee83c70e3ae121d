// Lowering of the image layers: conv2d, batch_norm, max_pool2d, avg_pool2d,
// adaptive_avg_pool2d and flatten (docs/spec.md). Inputs are NCHW image batches; a window's
// kernel, stride, padding and dilation are one integer (square) or [height, width] in the spec,
// as PyTorch's int-or-tuple, and [height, width] pairs in the IR.
#include <cmath>

#include "frontend/lowerings.h"

namespace gradc::frontend {

namespace {

// The layer's input as an image batch [N, C, H, W], or an error.
ir::Value* imageInput(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() != 4)
    return layer.error(x.pos, layer.describe() + " needs an image batch [batch, channels, height, width], but " +
                                  typeOf(x),
                       "image inputs are declared as {shape: [batch, channels, height, width], dtype: f32}");
  return x.value;
}

std::vector<std::int64_t> square(std::int64_t v) { return {v, v}; }

// padding >= 0 on both axes (reported at the attribute); nullopt after an error.
std::optional<std::vector<std::int64_t>> padding(Layer& layer) {
  const std::vector<std::int64_t> p = layer.pair("padding");
  for (std::int64_t side : p)
    if (side < 0) {
      layer.error(layer.attrPos("padding"),
                  "padding of " + layer.describe() + " must be >= 0, got " + std::to_string(side));
      return std::nullopt;
    }
  return p;
}

// The stride: given, or the kernel (PyTorch's pooling default).
std::vector<std::int64_t> poolStride(Layer& layer) { return layer.pair(layer.has("stride") ? "stride" : "kernel"); }

}  // namespace

// conv2d: weight [out, in / groups, k, k] initialised as torch.nn.Conv2d's (uniform with bound
// 1 / sqrt(fan_in) for weight and bias), or N(0, init_std^2) with a zero bias.
ir::Value* lowerConv2d(Layer& layer) {
  ir::Value* x = imageInput(layer);
  if (!x) return nullptr;
  const std::int64_t in = x->type().shape[1], out = layer.integer("out");
  const std::vector<std::int64_t> k = layer.pair("kernel");
  const std::int64_t groups = layer.integer("groups");
  if (in % groups != 0 || out % groups != 0)
    return layer.error(layer.attrPos("groups"), layer.describe() + ": groups = " + std::to_string(groups) +
                                                    " must divide the input channels (" + std::to_string(in) +
                                                    ") and out (" + std::to_string(out) + ")");
  std::optional<std::vector<std::int64_t>> pad = padding(layer);
  if (!pad) return nullptr;
  bool ok = true;
  const std::optional<double> initStd = initStdAttr(layer, "init_std", ok);
  if (!ok) return nullptr;
  const double fanIn = static_cast<double>(in / groups * k[0] * k[1]);
  const double bound = 1.0 / std::sqrt(fanIn);
  ir::Value* w =
      layer.param("weight", {out, in / groups, k[0], k[1]}, initStd ? normalInit(*initStd) : uniformInit(bound));
  if (!w) return nullptr;
  std::vector<ir::Value*> operands{x, w};
  if (layer.flag("bias")) {
    ir::Value* b = layer.param("bias", {out}, initStd ? zerosInit() : uniformInit(bound));
    if (!b) return nullptr;
    operands.push_back(b);
  }
  return layer.emit1("conv2d", std::move(operands),
                     {{"stride", layer.pair("stride")},
                      {"padding", *pad},
                      {"dilation", layer.pair("dilation")},
                      {"groups", groups}});
}

// batch_norm: weight [C] (ones), bias [C] (zeros), and the running statistics running_mean
// (zeros), running_var (ones) and num_batches_tracked (i64, 0), PyTorch's buffers, updated in
// place right after the normalisation (ir/ops_batch_norm.cpp); `momentum: null` averages every
// batch so far (PyTorch's momentum=None: the weight of batch n is 1 / n, from num_batches_tracked).
ir::Value* lowerBatchNorm(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() < 2)
    return layer.error(x.pos, layer.describe() + " needs an input [batch, channels, ...], but " + typeOf(x));
  const double eps = layer.real("eps"), momentum = layer.real("momentum");
  const bool cumulative = std::isnan(momentum);  // momentum: null
  if (!(eps > 0)) return layer.error(layer.attrPos("eps"), "eps of " + layer.describe() + " must be positive");
  if (!cumulative && !(momentum >= 0 && momentum <= 1))
    return layer.error(layer.attrPos("momentum"), "momentum of " + layer.describe() + " must be in [0, 1] or null");
  const std::int64_t c = x.value->type().shape[1];
  auto [w, b] = normAffine(layer, c);
  if (!b) return nullptr;
  ir::Node* norm = layer.emit("batch_norm", {x.value, w, b}, {{"eps", eps}});
  if (!norm) return nullptr;
  if (layer.flag("track_running_stats")) {
    auto stat = [](const char* init) {
      return ir::AttrMap{{"init", std::string(init)}, {"role", std::string("running_stat")}};
    };
    ir::Value* mean = layer.param("running_mean", {c}, stat("zeros"));
    ir::Value* var = mean ? layer.param("running_var", {c}, stat("ones")) : nullptr;
    ir::Value* tracked = var ? layer.param("num_batches_tracked", {}, stat("zeros"), ir::DType::i64) : nullptr;
    if (!tracked) return nullptr;
    ir::AttrMap update{{"momentum", cumulative ? 0.0 : momentum}};
    if (cumulative) update["cumulative"] = true;
    if (!layer.emit("running_stats_update", {mean, var, tracked, norm->result(1), norm->result(3)}, std::move(update)))
      return nullptr;
  }
  return norm->result(0);
}

ir::Value* lowerMaxPool2d(Layer& layer) {
  ir::Value* x = imageInput(layer);
  if (!x) return nullptr;
  std::optional<std::vector<std::int64_t>> pad = padding(layer);
  if (!pad) return nullptr;
  ir::Node* n = layer.emit("max_pool2d", {x},
                           {{"kernel", layer.pair("kernel")},
                            {"stride", poolStride(layer)},
                            {"padding", *pad},
                            {"dilation", layer.pair("dilation")},
                            {"ceil_mode", layer.flag("ceil_mode")}});
  return n ? n->result(0) : nullptr;  // result 1 (the indices of the maxima) is for backward
}

ir::Value* lowerAvgPool2d(Layer& layer) {
  ir::Value* x = imageInput(layer);
  if (!x) return nullptr;
  std::optional<std::vector<std::int64_t>> pad = padding(layer);
  if (!pad) return nullptr;
  return layer.emit1("avg_pool2d", {x},
                     {{"kernel", layer.pair("kernel")},
                      {"stride", poolStride(layer)},
                      {"padding", *pad},
                      {"ceil_mode", layer.flag("ceil_mode")},
                      {"count_include_pad", layer.flag("count_include_pad")}});
}

// adaptive_avg_pool2d to [oh, ow] (`size`: one side or [height, width]): when the sizes divide
// the input, windows of (H / oh) x (W / ow) with that stride, which is what PyTorch's adaptive
// pooling computes then (global average pooling, size 1, always does); otherwise the
// adaptive_avg_pool2d op, PyTorch's windows of unequal sizes.
ir::Value* lowerAdaptiveAvgPool2d(Layer& layer) {
  ir::Value* x = imageInput(layer);
  if (!x) return nullptr;
  const std::vector<std::int64_t> size = layer.pair("size");
  const std::int64_t h = x->type().shape[2], w = x->type().shape[3];
  if (h % size[0] == 0 && w % size[1] == 0) {
    const std::vector<std::int64_t> window{h / size[0], w / size[1]};
    return layer.emit1("avg_pool2d", {x},
                       {{"kernel", window},
                        {"stride", window},
                        {"padding", square(0)},
                        {"ceil_mode", false},
                        {"count_include_pad", true}});
  }
  return layer.emit1("adaptive_avg_pool2d", {x}, {{"output_size", size}});
}

// flatten: axes start_dim .. last merged into one (a reshape view), torch.flatten's rule.
ir::Value* lowerFlatten(Layer& layer) {
  const ir::TensorType& t = layer.input()->type();
  std::optional<int> start = ir::normalizeAxis(layer.integer("start_dim"), t.rank());
  if (!start)
    return layer.error(layer.attrPos("start_dim"), layer.describe() + ": start_dim " +
                                                       std::to_string(layer.integer("start_dim")) +
                                                       " is out of range for its input " + ir::toString(t));
  ir::Shape shape(t.shape.begin(), t.shape.begin() + *start);
  std::int64_t rest = 1;
  for (size_t a = static_cast<size_t>(*start); a < t.shape.size(); ++a) rest *= t.shape[a];
  shape.push_back(rest);
  if (shape == t.shape) return layer.input();
  return layer.emit1("reshape", {layer.input()}, {{"shape", shape}});
}

}  // namespace gradc::frontend
