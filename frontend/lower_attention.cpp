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
// With `rope`, q and k are rotated (ir op rope, positions along S) while still [B, S, H, Dh].
//
// With `kv_input` (cross-attention), keys and values are projected from that value
// [B, S_kv, D_kv] instead of x, in the same separate-projection layout (KV = kv_heads or H).
//
// With `kv_heads` (grouped-query attention, KV heads of keys and values shared by G = H / KV
// query heads each; KV = H is ordinary multi-head attention), the projections are separate, as
// in Hugging Face's LLaMA (q_proj [H Dh, D], k_proj and v_proj [KV Dh, D], o_proj [D, H Dh]),
// and the keys and values are never repeated: queries are grouped as [B, KV, G, S, Dh] against
// keys and values [B, KV, 1, S, Dh], and matmul broadcasts over the group axis. Query head
// h = kv G + g reads key head kv = h / G, as Hugging Face's repeat_kv.
#include <cmath>

#include "frontend/lowerings.h"

namespace gradc::frontend {

namespace {

// Swaps the axes a and b.
ir::Value* swapAxes(Layer& layer, ir::Value* t, std::int64_t a, std::int64_t b) {
  return t ? layer.emit1("transpose", {t}, {{"dim0", a}, {"dim1", b}}) : nullptr;
}

ir::Value* rotate(Layer& layer, ir::Value* t) {
  if (!t || !layer.flag("rope")) return t;
  return layer.emit1("rope", {t}, {{"base", layer.real("rope_base")}, {"seq_dim", std::int64_t{1}}, {"inverse", false}});
}

// Scaled dot-product attention of q against k and v (the last two axes are positions and
// features; leading axes broadcast), with the causal mask and dropout as the layer says.
ir::Value* attend(Layer& layer, ir::Value* q, ir::Value* k, ir::Value* v, std::int64_t dh, double p) {
  const std::int64_t rank = q->type().rank();
  ir::Value* scores = layer.emit1("matmul", {q, swapAxes(layer, k, rank - 2, rank - 1)});
  if (!scores) return nullptr;
  scores = layer.emit1("scale", {scores}, {{"factor", 1.0 / std::sqrt(static_cast<double>(dh))}});
  if (scores && layer.flag("causal")) scores = layer.emit1("causal_mask", {scores});
  ir::Value* probs = scores ? layer.emit1("softmax", {scores}, {{"dim", rank - 1}}) : nullptr;
  if (probs && p > 0.0) probs = layer.dropout(probs, p);
  return probs ? layer.emit1("matmul", {probs, v}) : nullptr;
}

ir::Value* groupedQueryAttention(Layer& layer, ir::Value* x, ir::Value* kvSource, std::int64_t H, std::int64_t Dh,
                                 double p, bool bias, std::optional<double> initStd, std::optional<double> projStd) {
  const ir::Shape& shape = x->type().shape;
  const std::int64_t B = shape[0], S = shape[1], D = shape[2];
  const std::int64_t Skv = kvSource->type().shape[1];
  const std::int64_t KV = layer.has("kv_heads") ? layer.integer("kv_heads") : H;
  if (H % KV != 0)
    return layer.error(layer.attrPos("kv_heads"),
                       layer.describe() + ": kv_heads " + std::to_string(KV) + " does not divide heads " +
                           std::to_string(H),
                       "each key/value head serves heads / kv_heads query heads");
  const std::int64_t G = H / KV;
  // [B, L, n Dh] -> [B, L, KV, n / KV, Dh] -> rope (when rotated) -> [B, KV, n / KV, L, Dh]
  auto toGroups = [&](ir::Value* t, std::int64_t length, std::int64_t perGroup, bool rotated) -> ir::Value* {
    if (!t) return nullptr;
    t = layer.emit1("reshape", {t}, {{"shape", std::vector<std::int64_t>{B, length, KV, perGroup, Dh}}});
    if (rotated) t = rotate(layer, t);
    return swapAxes(layer, swapAxes(layer, t, 1, 2), 2, 3);
  };
  ir::Value* q = toGroups(linearWithParams(layer, x, "q_proj", H * Dh, bias, initStd), S, G, true);
  ir::Value* k = q ? toGroups(linearWithParams(layer, kvSource, "k_proj", KV * Dh, bias, initStd), Skv, 1, true) : nullptr;
  ir::Value* v = k ? toGroups(linearWithParams(layer, kvSource, "v_proj", KV * Dh, bias, initStd), Skv, 1, false) : nullptr;
  if (!v) return nullptr;
  ir::Value* out = attend(layer, q, k, v, Dh, p);  // [B, KV, G, S, Dh]
  out = swapAxes(layer, swapAxes(layer, out, 2, 3), 1, 2);  // [B, S, KV, G, Dh]
  if (!out) return nullptr;
  out = layer.emit1("reshape", {out}, {{"shape", std::vector<std::int64_t>{B, S, H * Dh}}});
  return out ? linearWithParams(layer, out, "o_proj", D, bias, projStd) : nullptr;
}

}  // namespace

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
  if (layer.flag("rope") && Dh % 2 != 0)
    return layer.error(layer.attrPos("rope"), layer.describe() + ": rope rotates pairs of features, but a head has " +
                                                  std::to_string(Dh) + " (an odd number)");
  if (layer.has("kv_input")) {
    const LayerInput& kv = layer.inputs[1];
    const ir::TensorType& kt = kv.value->type();
    if (kt.rank() != 3 || kt.shape[0] != B)
      return layer.error(kv.pos, layer.describe() + " takes keys and values from [batch, seq_kv, features] with the "
                                                     "query's batch of " + std::to_string(B) + ", but '" + kv.name +
                                                     "' is " + ir::toString(kt));
    if (layer.flag("rope"))
      return layer.error(layer.attrPos("rope"), layer.describe() + ": rope with kv_input would rotate two sequences "
                                                    "by unrelated positions; leave one of them out");
    return groupedQueryAttention(layer, in.value, kv.value, H, Dh, p, bias, initStd, projStd);
  }
  if (layer.has("kv_heads")) return groupedQueryAttention(layer, in.value, in.value, H, Dh, p, bias, initStd, projStd);

  ir::Value* qkv = linearWithParams(layer, in.value, "qkv", 3 * D, bias, initStd);
  if (!qkv) return nullptr;
  ir::Node* split = layer.emit("split", {qkv}, {{"dim", std::int64_t{2}}, {"sections", std::int64_t{3}}});
  if (!split) return nullptr;

  // [B, S, D] -> [B, H, S, Dh] (q and k rotated first with rope)
  auto toHeads = [&](ir::Value* t, bool rotated) -> ir::Value* {
    ir::Value* r = layer.emit1("reshape", {t}, {{"shape", std::vector<std::int64_t>{B, S, H, Dh}}});
    if (rotated) r = rotate(layer, r);
    return swapAxes(layer, r, 1, 2);
  };
  ir::Value* q = toHeads(split->result(0), true);
  if (!q) return nullptr;
  ir::Value* k = toHeads(split->result(1), true);
  if (!k) return nullptr;
  ir::Value* v = toHeads(split->result(2), false);
  if (!v) return nullptr;

  ir::Value* out = attend(layer, q, k, v, Dh, p);  // [B, H, S, Dh]
  if (!out) return nullptr;
  out = swapAxes(layer, out, 1, 2);
  if (!out) return nullptr;
  out = layer.emit1("reshape", {out}, {{"shape", std::vector<std::int64_t>{B, S, D}}});
  if (!out) return nullptr;
  return linearWithParams(layer, out, "proj", D, bias, projStd);
}

}  // namespace gradc::frontend
