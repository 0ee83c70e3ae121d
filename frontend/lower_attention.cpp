// Lowering of multi-head self-attention into primitive IR ops, so that the remat pass can
// see (and recompute) every intermediate. Shapes, for x[B, S, D] with H heads of Dh = D / H:
//
//   qkv  = linear(x, qkv.weight[3D, D], qkv.bias[3D])          [B, S, 3D]
//   q, k, v = split(qkv, dim 2, 3 sections)                    [B, S, D] each
//   q = transpose(reshape(q, [B, S, H, Dh]), 1, 2)             [B, H, S, Dh]  (same for k, v)
//   scores = scale(matmul(q, transpose(k, 2, 3)), 1/sqrt(Dh))  [B, H, S, S]
//   scores = causal_mask(scores)                               (when causal)
//   p = dropout(softmax(scores, dim 3))                        (dropout when > 0)
//   out = reshape(transpose(matmul(p, v), 1, 2), [B, S, D])    [B, S, D]
//   y = linear(out, proj.weight[D, D], proj.bias[D])           [B, S, D]
//
// Parameters match a fused-QKV module (q, k, v stacked in that order along the rows).
#include <cmath>

#include "frontend/lowerings.h"

namespace gradc::frontend {

ir::Value* lowerAttention(Layer& layer) {
  const LayerInput& in = layer.inputs[0];
  const ir::TensorType& type = in.value->type();
  if (type.rank() != 3)
    return layer.error(in.pos, layer.describe() + " needs an input [batch, seq, d_model], but '" + in.name + "' is " +
                                   ir::toString(type));
  const std::int64_t B = type.shape[0], S = type.shape[1], D = type.shape[2];
  const std::int64_t H = layer.integer("heads");
  if (D % H != 0)
    return layer.error(layer.attrPos("heads"),
                       layer.describe() + ": d_model " + std::to_string(D) + " is not divisible by heads " +
                           std::to_string(H),
                       "each head gets d_model / heads features; choose heads dividing " + std::to_string(D));
  const std::int64_t Dh = D / H;
  double p = layer.real("dropout");
  if (!(p >= 0.0 && p < 1.0))
    return layer.error(layer.attrPos("dropout"), "dropout of " + layer.describe() + " must be in [0, 1), got " +
                                                     std::to_string(p));
  const bool bias = layer.flag("bias");
  bool ok = true;
  const std::optional<double> initStd = initStdAttr(layer, "init_std", ok);
  if (!ok) return nullptr;
  std::optional<double> projStd = initStdAttr(layer, "proj_init_std", ok);
  if (!ok) return nullptr;
  if (!projStd) projStd = initStd;

  ir::Value* qkv = linearWithParams(layer, in.value, "qkv", 3 * D, bias, initStd);
  if (!qkv) return nullptr;
  ir::Node* split = layer.emit("split", {qkv}, {{"dim", std::int64_t{2}}, {"sections", std::int64_t{3}}});
  if (!split) return nullptr;

  // [B, S, D] -> [B, H, S, Dh]
  auto toHeads = [&](ir::Value* t) -> ir::Value* {
    ir::Value* r = layer.emit1("reshape", {t}, {{"shape", std::vector<std::int64_t>{B, S, H, Dh}}});
    if (!r) return nullptr;
    return layer.emit1("transpose", {r}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
  };
  ir::Value* q = toHeads(split->result(0));
  if (!q) return nullptr;
  ir::Value* k = toHeads(split->result(1));
  if (!k) return nullptr;
  ir::Value* v = toHeads(split->result(2));
  if (!v) return nullptr;

  ir::Value* kT = layer.emit1("transpose", {k}, {{"dim0", std::int64_t{2}}, {"dim1", std::int64_t{3}}});
  if (!kT) return nullptr;
  ir::Value* scores = layer.emit1("matmul", {q, kT});
  if (!scores) return nullptr;
  scores = layer.emit1("scale", {scores}, {{"factor", 1.0 / std::sqrt(static_cast<double>(Dh))}});
  if (!scores) return nullptr;
  if (layer.flag("causal")) {
    scores = layer.emit1("causal_mask", {scores});
    if (!scores) return nullptr;
  }
  ir::Value* probs = layer.emit1("softmax", {scores}, {{"dim", std::int64_t{3}}});
  if (!probs) return nullptr;
  if (p > 0.0) {
    probs = layer.dropout(probs, p);
    if (!probs) return nullptr;
  }
  ir::Value* out = layer.emit1("matmul", {probs, v});
  if (!out) return nullptr;
  out = layer.emit1("transpose", {out}, {{"dim0", std::int64_t{1}}, {"dim1", std::int64_t{2}}});
  if (!out) return nullptr;
  out = layer.emit1("reshape", {out}, {{"shape", std::vector<std::int64_t>{B, S, D}}});
  if (!out) return nullptr;
  return linearWithParams(layer, out, "proj", D, bias, projStd);
}

}  // namespace gradc::frontend
