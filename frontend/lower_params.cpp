// Lowering of the layers that own parameters: linear, embedding, pos_embedding, layer_norm.
// Parameter layouts and initialisers follow PyTorch (torch.nn.Linear, nn.Embedding,
// nn.LayerNorm), so saved weights load into the equivalent PyTorch modules.
#include <cmath>

#include "frontend/lowerings.h"

namespace gradc::frontend {

namespace {

std::string typeOf(const LayerInput& in) { return "'" + in.name + "' is " + ir::toString(in.value->type()); }

}  // namespace

ir::Value* linearWithParams(Layer& layer, ir::Value* x, std::string_view prefix, std::int64_t out, bool bias) {
  std::int64_t in = x->type().shape.back();
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  std::string p = prefix.empty() ? std::string() : std::string(prefix) + ".";
  ir::Value* w = layer.param(p + "weight", {out, in}, uniformInit(bound));
  if (!w) return nullptr;
  std::vector<ir::Value*> operands{x, w};
  if (bias) {
    ir::Value* b = layer.param(p + "bias", {out}, uniformInit(bound));
    if (!b) return nullptr;
    operands.push_back(b);
  }
  return layer.emit1("linear", std::move(operands));
}

ir::Value* lowerLinear(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() < 1)
    return layer.error(x.pos, layer.describe() + " needs an input with a feature dimension, but " + typeOf(x));
  return linearWithParams(layer, x.value, "", layer.integer("out"), layer.flag("bias"));
}

ir::Value* lowerEmbedding(Layer& layer) {
  ir::Value* weight = layer.param("weight", {layer.integer("num"), layer.integer("dim")}, normalInit(1.0));
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
  ir::Value* table = layer.param("weight", {length, dim}, normalInit(1.0));
  if (!table) return nullptr;
  if (length > seq) {
    table = layer.emit1("slice", {table},
                        {{"dim", std::int64_t{0}}, {"start", std::int64_t{0}}, {"end", seq}});
    if (!table) return nullptr;
  }
  return layer.emit1("add", {x.value, table});
}

ir::Value* lowerLayerNorm(Layer& layer) {
  const LayerInput& x = layer.inputs[0];
  if (x.value->type().rank() < 1)
    return layer.error(x.pos, layer.describe() + " needs an input with a feature dimension, but " + typeOf(x));
  double eps = layer.real("eps");
  if (!(eps > 0)) return layer.error(layer.attrPos("eps"), "eps of " + layer.describe() + " must be positive");
  std::int64_t d = x.value->type().shape.back();
  ir::Value* w = layer.param("weight", {d}, onesInit());
  if (!w) return nullptr;
  ir::Value* b = layer.param("bias", {d}, zerosInit());
  if (!b) return nullptr;
  ir::Node* node = layer.emit("layer_norm", {x.value, w, b}, {{"eps", eps}});
  return node ? node->result(0) : nullptr;  // results 1 and 2 (mean, rstd) are for backward
}

}  // namespace gradc::frontend
