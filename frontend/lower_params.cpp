// Lowering of the layers that own parameters: linear, embedding, pos_embedding, layer_norm.
// Parameter layouts and initialisers follow PyTorch (torch.nn.Linear, nn.Embedding,
// nn.LayerNorm), so saved weights load into the equivalent PyTorch modules.
#include <cmath>
#include <optional>
#include <tuple>

#include "frontend/lowerings.h"

namespace gradc::frontend {

std::optional<double> initStdAttr(Layer& layer, std::string_view attr, bool& ok) {
  ok = true;
  if (!layer.has(attr)) return std::nullopt;
  const double std = layer.real(attr);
  if (!(std > 0)) {
    ok = false;
    layer.error(layer.attrPos(attr), std::string(attr) + " of " + layer.describe() + " must be positive");
    return std::nullopt;
  }
  return std;
}

ir::Value* linearWithParams(Layer& layer, ir::Value* x, std::string_view prefix, std::int64_t out, bool bias,
                            std::optional<double> initStd) {
  std::int64_t in = x->type().shape.back();
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  std::string p = prefix.empty() ? std::string() : std::string(prefix) + ".";
  ir::Value* w = layer.param(p + "weight", {out, in}, initStd ? normalInit(*initStd) : uniformInit(bound));
  if (!w) return nullptr;
  std::vector<ir::Value*> operands{x, w};
  if (bias) {
    ir::Value* b = layer.param(p + "bias", {out}, initStd ? zerosInit() : uniformInit(bound));
    if (!b) return nullptr;
    operands.push_back(b);
  }
  return layer.emit1("linear", std::move(operands));
}

namespace {

// The weight a `tie:` names, checked against what this layer needs: [rows, cols] with `cols`
// fixed by the input, and the layer's own size attribute (when given) equal to the rows.
ir::Value* tiedWeight(Layer& layer, std::string_view colsWhat, std::optional<std::int64_t> cols,
                      std::string_view rowsAttr) {
  ir::Value* w = layer.tiedParam("tie", "weight");
  if (!w) return nullptr;
  const ir::Shape& shape = w->type().shape;
  const std::string tied = "the tied '" + layer.word("tie") + ".weight' is " + ir::toString(w->type());
  if (shape.size() != 2)
    return layer.error(layer.attrPos("tie"), layer.describe() + " needs a 2-D weight, but " + tied);
  if (cols && shape[1] != *cols)
    return layer.error(layer.attrPos("tie"), layer.describe() + " needs a weight with " + std::to_string(*cols) +
                                                 " columns (" + std::string(colsWhat) + "), but " + tied);
  if (layer.has(rowsAttr) && layer.integer(rowsAttr) != shape[0])
    return layer.error(layer.attrPos(rowsAttr), layer.describe() + " has " + std::string(rowsAttr) + " " +
                                                    std::to_string(layer.integer(rowsAttr)) + ", but " + tied,
                       "leave '" + std::string(rowsAttr) + "' out: a tied layer takes its size from the weight");
  return w;
}

}  // namespace

ir::Value* lowerLinear(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() < 1)
    return layer.error(x.pos, layer.describe() + " needs an input with a feature dimension, but " + typeOf(x));
  const std::int64_t in = x.value->type().shape.back();
  if (layer.has("tie")) {
    // One parameter, two readers: autodiff sums both gradients into it; saved once, under
    // the name of the layer that made it (as PyTorch's state_dict of a tied GPT-2).
    ir::Value* w = tiedWeight(layer, "the input's " + std::to_string(in) + " features", in, "out");
    if (!w) return nullptr;
    std::vector<ir::Value*> operands{x.value, w};
    if (layer.flag("bias")) {
      ir::Value* b = layer.param("bias", {w->type().shape[0]},
                                 layer.has("init_std") ? zerosInit() : uniformInit(1.0 / std::sqrt(static_cast<double>(in))));
      if (!b) return nullptr;
      operands.push_back(b);
    }
    return layer.emit1("linear", std::move(operands));
  }
  if (!layer.has("out"))
    return layer.error(layer.pos(), "linear layer '" + layer.specName() + "' is missing its 'out' attribute",
                       "out: output features (or tie: an earlier layer whose weight it shares)");
  bool ok = true;
  std::optional<double> initStd = initStdAttr(layer, "init_std", ok);
  if (!ok) return nullptr;
  return linearWithParams(layer, x.value, "", layer.integer("out"), layer.flag("bias"), initStd);
}

ir::Value* lowerEmbedding(Layer& layer) {
  if (layer.has("tie")) {
    if (layer.has("dim") && !layer.has("num"))
      return layer.error(layer.attrPos("dim"), layer.describe() + " ties its table: leave 'dim' out too");
    ir::Value* w = tiedWeight(layer, "dim", layer.has("dim") ? std::optional(layer.integer("dim")) : std::nullopt, "num");
    if (!w) return nullptr;
    return layer.emit1("embedding", {w, layer.input()});
  }
  for (std::string_view attr : {"num", "dim"})
    if (!layer.has(attr))
      return layer.error(layer.pos(), "embedding layer '" + layer.specName() + "' is missing its '" +
                                          std::string(attr) + "' attribute",
                         std::string(attr) + (attr == "num" ? ": number of rows (vocabulary size)" : ": features per row") +
                             " (or tie: an earlier layer whose weight it shares)");
  bool ok = true;
  std::optional<double> initStd = initStdAttr(layer, "init_std", ok);
  if (!ok) return nullptr;
  ir::Value* weight =
      layer.param("weight", {layer.integer("num"), layer.integer("dim")}, normalInit(initStd.value_or(1.0)));
  if (!weight) return nullptr;
  return layer.emit1("embedding", {weight, layer.input()});
}

ir::Value* lowerPosEmbedding(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  const ir::Shape& shape = x.value->type().shape;
  if (shape.size() < 2)
    return layer.error(x.pos, layer.describe() + " needs an input [..., seq, dim], but " + typeOf(x));
  std::int64_t seq = shape[shape.size() - 2], dim = shape.back();
  if (layer.has("dim") && layer.integer("dim") != dim)
    return layer.error(layer.attrPos("dim"), layer.describe() + " has dim " + std::to_string(layer.integer("dim")) +
                                                 ", but its input's last dimension is " + std::to_string(dim) + " (" +
                                                 typeOf(x) + ")");
  std::int64_t length = layer.integer("length");
  if (length < seq)
    return layer.error(layer.attrPos("length"),
                       layer.describe() + " has length " + std::to_string(length) + ", shorter than the " +
                           std::to_string(seq) + " positions of its input (" + typeOf(x) + ")",
                       "the table needs at least one row per position: length >= " + std::to_string(seq));
  bool ok = true;
  std::optional<double> initStd = initStdAttr(layer, "init_std", ok);
  if (!ok) return nullptr;
  ir::Value* table = layer.param("weight", {length, dim}, normalInit(initStd.value_or(1.0)));
  if (!table) return nullptr;
  if (length > seq) {
    table = layer.emit1("slice", {table},
                        {{"dim", std::int64_t{0}}, {"start", std::int64_t{0}}, {"end", seq}});
    if (!table) return nullptr;
  }
  return layer.emit1("add", {x.value, table});
}

namespace {

// A constant [d] of `value` in the input's element type (a `full` node).
ir::Value* constantVector(Layer& layer, std::int64_t d, double value) {
  return layer.emit1("full", {},
                     {{"shape", std::vector<std::int64_t>{d}}, {"dtype", layer.input()->type().dtype}, {"value", value}});
}

}  // namespace

std::pair<ir::Value*, ir::Value*> normAffine(Layer& layer, std::int64_t d) {
  if (layer.flag("affine")) {
    ir::Value* w = layer.param("weight", {d}, onesInit());
    return {w, w ? layer.param("bias", {d}, zerosInit()) : nullptr};
  }
  // No parameters: the kernel's weight and bias are constant ones and zeros.
  ir::Value* w = constantVector(layer, d, 1.0);
  return {w, w ? constantVector(layer, d, 0.0) : nullptr};
}

// layer_norm over the last `axes` axes (nn.LayerNorm(x.shape[-axes:])): parameters of that
// trailing shape, as PyTorch names and lays them out. Over several axes the input is viewed as
// [..., D] (D their product) and the parameters as [D], the op normalises the last axis, and the
// result is viewed back: the same arithmetic as normalized_shape, with one kernel.
ir::Value* lowerLayerNorm(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  const ir::Shape& shape = x.value->type().shape;
  const std::int64_t axes = layer.integer("axes");
  if (axes < 1 || axes > static_cast<std::int64_t>(shape.size()))
    return layer.error(axes < 1 ? layer.attrPos("axes") : x.pos,
                       layer.describe() + " normalises the last " + std::to_string(axes) +
                           " axes, but its input is " + typeOf(x));
  double eps = layer.real("eps");
  if (!(eps > 0)) return layer.error(layer.attrPos("eps"), "eps of " + layer.describe() + " must be positive");
  const ir::Shape trailing(shape.end() - axes, shape.end());
  std::int64_t d = 1;
  for (std::int64_t e : trailing) d *= e;
  ir::Value *w = nullptr, *b = nullptr;
  if (layer.flag("affine") && !layer.flag("bias")) {
    // nn.LayerNorm(D, bias=False): a learned weight only; the kernel's bias is constant zeros.
    w = layer.param("weight", trailing, onesInit());
    b = w ? constantVector(layer, d, 0.0) : nullptr;
  } else if (layer.flag("affine")) {
    w = layer.param("weight", trailing, onesInit());
    b = w ? layer.param("bias", trailing, zerosInit()) : nullptr;
  } else {
    std::tie(w, b) = normAffine(layer, d);
  }
  if (!b) return nullptr;
  ir::Value* in = x.value;
  if (axes > 1) {
    ir::Shape rows(shape.begin(), shape.end() - axes);
    rows.push_back(d);
    in = layer.emit1("reshape", {in}, {{"shape", rows}});
    if (w->type().rank() > 1) w = layer.emit1("reshape", {w}, {{"shape", ir::Shape{d}}});
    if (b->type().rank() > 1) b = layer.emit1("reshape", {b}, {{"shape", ir::Shape{d}}});
    if (!in || !w || !b) return nullptr;
  }
  ir::Node* node = layer.emit("layer_norm", {in, w, b}, {{"eps", eps}});
  if (!node) return nullptr;  // results 1 and 2 (mean, rstd) are for backward
  return axes > 1 ? layer.emit1("reshape", {node->result(0)}, {{"shape", shape}}) : node->result(0);
}

ir::Value* lowerRmsNorm(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() < 1)
    return layer.error(x.pos, layer.describe() + " needs an input with a feature dimension, but " + typeOf(x));
  const double eps = layer.real("eps");
  if (!(eps > 0)) return layer.error(layer.attrPos("eps"), "eps of " + layer.describe() + " must be positive");
  ir::Value* w = layer.param("weight", {x.value->type().shape.back()}, onesInit());
  if (!w) return nullptr;
  ir::Node* node = layer.emit("rms_norm", {x.value, w}, {{"eps", eps}});
  return node ? node->result(0) : nullptr;  // result 1 (rstd) is for backward
}

// down_proj(silu(gate_proj(x)) * up_proj(x)), with Hugging Face LlamaMLP's parameter names.
ir::Value* lowerSwiglu(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() < 1)
    return layer.error(x.pos, layer.describe() + " needs an input with a feature dimension, but " + typeOf(x));
  const std::int64_t d = x.value->type().shape.back(), hidden = layer.integer("hidden");
  const bool bias = layer.flag("bias");
  bool ok = true;
  const std::optional<double> initStd = initStdAttr(layer, "init_std", ok);
  if (!ok) return nullptr;
  ir::Value* gate = linearWithParams(layer, x.value, "gate_proj", hidden, bias, initStd);
  if (!gate) return nullptr;
  ir::Value* up = linearWithParams(layer, x.value, "up_proj", hidden, bias, initStd);
  if (!up) return nullptr;
  ir::Value* act = layer.emit1("silu", {gate});
  if (!act) return nullptr;
  ir::Value* product = layer.emit1("mul", {act, up});
  if (!product) return nullptr;
  return linearWithParams(layer, product, "down_proj", d, bias, initStd);
}

// A learned tensor of its own: "<name>.weight", the layer's output.
ir::Value* lowerParam(Layer& layer) {
  const std::vector<std::int64_t>& shape = layer.intList("shape");
  for (std::int64_t e : shape)
    if (e <= 0)
      return layer.error(layer.attrPos("shape"), layer.describe() + ": every extent of 'shape' must be positive, got " +
                                                     ir::shapeToString(shape));
  const std::string& init = layer.word("init");
  ir::AttrMap attrs;
  if (init == "normal") {
    if (!(layer.real("std") > 0)) return layer.error(layer.attrPos("std"), "std of " + layer.describe() + " must be positive");
    attrs = normalInit(layer.real("std"));
  } else if (init == "uniform") {
    if (!(layer.real("bound") > 0))
      return layer.error(layer.attrPos("bound"), "bound of " + layer.describe() + " must be positive");
    attrs = uniformInit(layer.real("bound"));
  } else {
    attrs = init == "ones" ? onesInit() : zerosInit();
  }
  return layer.param("weight", shape, std::move(attrs));
}

}  // namespace gradc::frontend
