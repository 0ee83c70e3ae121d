// Lowering of a multi-layer LSTM (torch.nn.LSTM with batch_first=True), unrolled over the
// sequence so that every time step is visible to the remat pass: this is the "RNN on very
// long sequences" case, where keeping all S steps' activations costs O(S) memory.
//
// Per layer l, for x[B, S, I_l] (I_0 = input features, I_l = H above):
//   xp = linear(x, weight_ih_l{l}[4H, I_l], bias_ih_l{l}[4H])         [B, S, 4H], all steps at once
//   h = c = zeros[B, H]
//   for t in 0 .. S-1:
//     g = xp_t + linear(h, weight_hh_l{l}[4H, H], bias_hh_l{l}[4H])   [B, 4H]
//     i, f, gg, o = split(g, dim 1, 4 sections)                       gate order i, f, g, o
//     c = sigmoid(f) * c + sigmoid(i) * tanh(gg)
//     h = sigmoid(o) * tanh(c)
//   each gate's activation emitted just before its first use (tanh(gg), sigmoid(i), their
//   product, sigmoid(f), ...): the fuse pass then makes one kernel of a step's nine elementwise
//   ops, reading the four gates through their column slices of g (passes/fuse.h).
//   y = stack(h_0 .. h_{S-1}, dim 1)                                   [B, S, H]
// bidirectional: a second set of parameters "<kind>_l{l}_reverse" runs t = S-1 .. 0 and its
// outputs join along the features, y = concat(y_forward, y_reverse, dim 2): [B, S, 2H], as
// torch.nn.LSTM(bidirectional=True).
//
// Nodes of step t carry the spec name "<layer>.step.<t>" ("<layer>.l<l>.step.<t>" when there
// are several layers) so that plans show which time step they belong to, and summaries group
// the steps as "<layer>.step.*".
#include <cmath>

#include "frontend/lowerings.h"

namespace gradc::frontend {

namespace {

// Upper bound of the IR nodes one layer emits: 4 per layer (linear, unbind, zeros, stack)
// plus 13 per step.
constexpr std::int64_t kNodesPerStep = 13;

}  // namespace

namespace {

// One direction of one layer over x[B, S, I]: its four parameters "<kind><sfx>", then the
// steps in time order (reverse: from S-1 down to 0, as PyTorch's reverse direction). Returns
// h_t for t = 0 .. S-1 in time order, or an empty vector after an error.
std::vector<ir::Value*> lstmDirection(Layer& layer, ir::Value* x, std::int64_t H, const std::string& sfx, bool reverse,
                                      const std::string& stepPrefix) {
  const std::int64_t B = x->type().shape[0], S = x->type().shape[1], features = x->type().shape[2];
  const std::int64_t fourH = 4 * H;
  const double bound = 1.0 / std::sqrt(static_cast<double>(H));
  ir::Value* wIh = layer.param("weight_ih" + sfx, {fourH, features}, uniformInit(bound));
  ir::Value* wHh = wIh ? layer.param("weight_hh" + sfx, {fourH, H}, uniformInit(bound)) : nullptr;
  ir::Value* bIh = wHh ? layer.param("bias_ih" + sfx, {fourH}, uniformInit(bound)) : nullptr;
  ir::Value* bHh = bIh ? layer.param("bias_hh" + sfx, {fourH}, uniformInit(bound)) : nullptr;
  if (!bHh) return {};

  ir::Value* xp = layer.emit1("linear", {x, wIh, bIh});
  if (!xp) return {};
  // One node takes xp apart into its S time steps: its gradient is a single stack, where
  // per-step selects would each scatter into a full [B, S, 4H] gradient (O(S^2) traffic).
  ir::Node* steps = layer.emit("unbind", {xp}, {{"dim", std::int64_t{1}}});
  if (!steps) return {};
  ir::Value* zeros = layer.emit1("zeros", {}, {{"shape", std::vector<std::int64_t>{B, H}}, {"dtype", layer.dtype()}});
  if (!zeros) return {};

  ir::Value* h = zeros;
  ir::Value* c = zeros;
  std::vector<ir::Value*> hs(static_cast<size_t>(S), nullptr);
  for (std::int64_t k = 0; k < S; ++k) {
    const std::int64_t t = reverse ? S - 1 - k : k;
    const std::string step = stepPrefix + std::to_string(t);
    auto op = [&](std::string_view name, std::vector<ir::Value*> operands, ir::AttrMap attrs = {}) {
      return layer.emit1(name, std::move(operands), std::move(attrs), step);
    };
    ir::Value* xt = steps->result(static_cast<size_t>(t));
    ir::Value* hh = op("linear", {h, wHh, bHh});
    ir::Value* gates = hh ? op("add", {xt, hh}) : nullptr;
    if (!gates) return {};
    ir::Node* split = layer.emit("split", {gates}, {{"dim", std::int64_t{1}}, {"sections", std::int64_t{4}}}, step);
    if (!split) return {};
    ir::Value* g = op("tanh", {split->result(2)});
    ir::Value* i = g ? op("sigmoid", {split->result(0)}) : nullptr;
    ir::Value* ig = i ? op("mul", {i, g}) : nullptr;
    ir::Value* f = ig ? op("sigmoid", {split->result(1)}) : nullptr;
    ir::Value* fc = f ? op("mul", {f, c}) : nullptr;
    c = fc ? op("add", {fc, ig}) : nullptr;
    ir::Value* tc = c ? op("tanh", {c}) : nullptr;
    ir::Value* o = tc ? op("sigmoid", {split->result(3)}) : nullptr;
    h = o ? op("mul", {o, tc}) : nullptr;
    if (!h) return {};
    hs[static_cast<size_t>(t)] = h;
  }
  return hs;
}

}  // namespace

ir::Value* lowerLstm(Layer& layer) {
  const LayerInput& in = layer.inputs[0];
  const ir::TensorType& type = in.value->type();
  if (type.rank() != 3)
    return layer.error(in.pos, layer.describe() + " needs an input [batch, seq, features], but '" + in.name +
                                   "' is " + ir::toString(type));
  const std::int64_t S = type.shape[1];
  const std::int64_t H = layer.integer("hidden"), L = layer.integer("layers");
  const bool bidirectional = layer.flag("bidirectional");
  const std::int64_t directions = bidirectional ? 2 : 1;

  // Unrolling is linear in S * L * directions; refuse before building what would not fit.
  LoweringState& state = layer.state();
  std::int64_t budget = state.options.maxGraphNodes - static_cast<std::int64_t>(state.graph.numNodes());
  std::int64_t perLayer = 0, needed = 0;
  if (__builtin_mul_overflow(S, kNodesPerStep, &perLayer) || __builtin_add_overflow(perLayer, 4, &perLayer) ||
      __builtin_mul_overflow(perLayer, L * directions, &needed) || needed > budget)
    return layer.error(layer.pos(),
                       layer.describe() + " unrolls " + std::to_string(S) + " time steps x " + std::to_string(L) +
                           " layers" + (bidirectional ? " x 2 directions" : "") + ", more than the limit of " +
                           std::to_string(state.options.maxGraphNodes) + " IR nodes",
                       "shorten the sequence or use fewer layers");
  std::int64_t fourH = 0;
  if (__builtin_mul_overflow(H, 4, &fourH))
    return layer.error(layer.attrPos("hidden"), layer.describe() + ": hidden " + std::to_string(H) + " is too large");

  ir::Value* x = in.value;
  for (std::int64_t l = 0; l < L; ++l) {
    const std::string sfx = "_l" + std::to_string(l);
    const std::string prefix = layer.specName() + (L > 1 ? ".l" + std::to_string(l) : std::string());
    std::vector<ir::Value*> forward = lstmDirection(layer, x, H, sfx, false, prefix + ".step.");
    if (forward.empty()) return nullptr;
    ir::Value* y = layer.emit1("stack", forward, {{"dim", std::int64_t{1}}});
    if (!y) return nullptr;
    if (bidirectional) {
      // PyTorch's reverse direction: its own parameters "<kind>_l<l>_reverse", run from the
      // last step to the first; its h_t joins the forward h_t along the features: [B, S, 2H].
      std::vector<ir::Value*> backward = lstmDirection(layer, x, H, sfx + "_reverse", true, prefix + ".reverse.step.");
      if (backward.empty()) return nullptr;
      ir::Value* yr = layer.emit1("stack", backward, {{"dim", std::int64_t{1}}});
      y = yr ? layer.emit1("concat", {y, yr}, {{"dim", std::int64_t{2}}}) : nullptr;
      if (!y) return nullptr;
    }
    x = y;
  }
  return x;
}

}  // namespace gradc::frontend
