// The table of spec ops. Each entry: name, inputs, attributes (type, default, one-line doc),
// lowering function, summary. docs/spec.md is the long form of this table.
#include "frontend/spec_ops.h"

#include "frontend/lowerings.h"

namespace gradc::frontend {

namespace {

using T = SpecAttrType;

const std::vector<SpecOp>& table() {
  static const std::vector<SpecOp> ops = {
      {.name = "linear",
       .attrs = {{"out", T::Size, "", false, "", "output features (required unless tie)"},
                 {"bias", T::Bool, "true", false, "", "add a learned bias"},
                 {"tie", T::LayerRef, "", false, "",
                  "share the weight [out, in] of this earlier layer (GPT-2's lm_head: tie: wte)"},
                 {"init_std", T::Float, "", false, "", "weight from N(0, init_std^2), bias zeros (default: PyTorch's uniform)"}},
       .lower = lowerLinear,
       .summary = "x[..., in] -> [..., out]; parameters weight [out, in], bias [out]"},
      {.name = "embedding",
       .indexInput = true,
       .attrs = {{"num", T::Size, "", false, "", "number of rows (vocabulary size; required unless tie)"},
                 {"dim", T::Size, "", false, "", "features per row (required unless tie)"},
                 {"tie", T::LayerRef, "", false, "", "share the weight [num, dim] of this earlier layer"},
                 {"init_std", T::Float, "", false, "", "rows from N(0, init_std^2) (default 1, PyTorch's)"}},
       .lower = lowerEmbedding,
       .summary = "integer indices[...] -> [..., dim]; parameter weight [num, dim]"},
      {.name = "pos_embedding",
       .attrs = {{"length", T::Size, "", true, "", "rows of the position table (>= the input's seq)"},
                 {"dim", T::Size, "", false, "", "features; must equal the input's last dimension"},
                 {"init_std", T::Float, "", false, "", "rows from N(0, init_std^2) (default 1, PyTorch's)"}},
       .lower = lowerPosEmbedding,
       .summary = "x[..., seq, dim] + weight[:seq]; parameter weight [length, dim]"},
      {.name = "layer_norm",
       .attrs = {{"eps", T::Float, "1e-5", false, "", "added to the variance"},
                 {"affine", T::Bool, "true", false, "", "learned weight and bias; false: none (y = normalised x)"}},
       .lower = lowerLayerNorm,
       .summary = "normalise the last dimension; parameters weight [D] (ones), bias [D] (zeros)"},
      {.name = "rms_norm",
       .attrs = {{"eps", T::Float, "1e-6", false, "", "added to the mean square"}},
       .lower = lowerRmsNorm,
       .summary = "x / sqrt(mean(x^2) + eps) * weight over the last dimension; parameter weight [D] (ones)"},
      {.name = "swiglu",
       .attrs = {{"hidden", T::Size, "", true, "", "hidden features of the gated MLP"},
                 {"bias", T::Bool, "false", false, "", "biases in the three linears"},
                 {"init_std", T::Float, "", false, "", "weights from N(0, init_std^2) (default: PyTorch's uniform)"}},
       .lower = lowerSwiglu,
       .summary = "down_proj(silu(gate_proj(x)) * up_proj(x)) (LLaMA's MLP); parameters gate_proj, up_proj "
                  "[hidden, D], down_proj [D, hidden]"},
      {.name = "param", .numInputs = 0,
       .attrs = {{"shape", T::IntList, "", true, "", "the tensor's extents"},
                 {"init", T::Choice, "normal", false, "normal|uniform|ones|zeros", "its initial values"},
                 {"std", T::Float, "1", false, "", "init normal: the standard deviation"},
                 {"bound", T::Float, "1", false, "", "init uniform: values in [-bound, bound]"}},
       .lower = lowerParam,
       .summary = "a free learned tensor <name>.weight (a class token, a learned bias, a scale)"},
      {.name = "attention",
       .attrs = {{"heads", T::Size, "", true, "", "number of heads; must divide d_model"},
                 {"causal", T::Bool, "false", false, "", "mask future positions"},
                 {"dropout", T::Float, "0", false, "", "dropout on the attention probabilities"},
                 {"bias", T::Bool, "true", false, "", "biases in the qkv and proj linears"},
                 {"init_std", T::Float, "", false, "", "qkv and proj weights from N(0, init_std^2), biases zeros (default: PyTorch's uniform)"},
                 {"proj_init_std", T::Float, "", false, "", "proj weight's std instead (GPT-2: 0.02 / sqrt(2 * layers))"},
                 {"kv_heads", T::Size, "", false, "",
                  "grouped-query attention: heads of keys and values, dividing heads (LLaMA layout: q_proj, k_proj, "
                  "v_proj, o_proj)"},
                 {"rope", T::Bool, "false", false, "", "rotary position embedding of queries and keys"},
                 {"kv_input", T::ValueRef, "", false, "",
                  "cross-attention: keys and values from this value [B, S_kv, D_kv] (LLaMA layout)"},
                 {"rope_base", T::Float, "10000", false, "", "rope's frequency base"}},
       .lower = lowerAttention,
       .summary = "multi-head self-attention on x[B, S, D]; parameters qkv.weight [3D, D], proj.weight [D, D]"},
      {.name = "lstm",
       .attrs = {{"hidden", T::Size, "", true, "", "hidden state features H"},
                 {"layers", T::Size, "1", false, "", "stacked LSTM layers"},
                 {"bidirectional", T::Bool, "false", false, "", "also run the sequence backwards: [B, S, 2H]"}},
       .lower = lowerLstm,
       .summary = "LSTM over x[B, S, I] (batch first), unrolled over S -> [B, S, H]"},
      {.name = "matmul", .numInputs = 2, .lower = lowerSameOp,
       .summary = "a[..., m, k] @ b[..., k, n] -> [..., m, n]"},
      {.name = "add", .numInputs = 2, .lower = lowerSameOp, .summary = "a + b (broadcasting)"},
      {.name = "sub", .numInputs = 2, .lower = lowerSameOp, .summary = "a - b (broadcasting)"},
      {.name = "mul", .numInputs = 2, .lower = lowerSameOp, .summary = "a * b (broadcasting)"},
      {.name = "scale",
       .attrs = {{"by", T::Float, "", true, "", "the constant factor"}},
       .lower = lowerScale,
       .summary = "x * by"},
      {.name = "relu", .lower = lowerSameOp, .summary = "max(x, 0)"},
      {.name = "gelu",
       .attrs = {{"approximate", T::Choice, "none", false, "none|tanh", "'none' (exact, erf) or 'tanh'"}},
       .lower = lowerGelu,
       .summary = "x * Phi(x)"},
      {.name = "tanh", .lower = lowerSameOp, .summary = "tanh(x)"},
      {.name = "silu", .lower = lowerSameOp, .summary = "x * sigmoid(x) (SiLU, swish)"},
      {.name = "exp", .lower = lowerSameOp, .summary = "e^x"},
      {.name = "sigmoid", .lower = lowerSameOp, .summary = "1 / (1 + exp(-x))"},
      {.name = "softmax",
       .attrs = {{"dim", T::Int, "-1", false, "", "the normalised axis (negative counts from the end)"}},
       .lower = lowerSoftmax,
       .summary = "exp(x) / sum(exp(x)) along dim"},
      {.name = "log_softmax",
       .attrs = {{"dim", T::Int, "-1", false, "", "the normalised axis (negative counts from the end)"}},
       .lower = lowerSoftmax,
       .summary = "log(softmax(x)) along dim"},
      {.name = "dropout",
       .attrs = {{"p", T::Float, "", true, "", "probability of zeroing an element, in [0, 1)"}},
       .lower = lowerDropout,
       .summary = "zero elements with probability p, scale the rest by 1 / (1 - p)"},
      {.name = "reshape",
       .attrs = {{"shape", T::IntList, "", true, "", "the new extents; one may be -1 (inferred)"}},
       .lower = lowerReshape,
       .summary = "same elements, new shape"},
      {.name = "transpose",
       .attrs = {{"dims", T::IntList, "", true, "", "the two axes to swap, e.g. [1, 2]"}},
       .lower = lowerTranspose,
       .summary = "swap two axes"},
      {.name = "sum",
       .attrs = {{"dims", T::IntList, "", false, "", "the reduced axes (negative count from the end); default: all"},
                 {"keepdim", T::Bool, "false", false, "", "keep them as extents of 1"}},
       .lower = lowerReduction,
       .summary = "sum over dims"},
      {.name = "mean",
       .attrs = {{"dims", T::IntList, "", false, "", "the reduced axes (negative count from the end); default: all"},
                 {"keepdim", T::Bool, "false", false, "", "keep them as extents of 1"}},
       .lower = lowerReduction,
       .summary = "mean over dims"},
      {.name = "concat", .numInputs = 2,
       .attrs = {{"dim", T::Int, "", true, "", "the joined axis; the other extents must agree"}},
       .lower = lowerConcat,
       .summary = "a and b joined along dim"},
      {.name = "split",
       .attrs = {{"sections", T::Size, "", true, "", "number of equal parts"},
                 {"part", T::Int, "", true, "", "which part (0-based)"},
                 {"dim", T::Int, "-1", false, "", "the split axis"}},
       .lower = lowerSplit,
       .summary = "one of `sections` equal parts of x along dim (a view)"},
      {.name = "causal_mask", .lower = lowerSameOp,
       .summary = "x[..., i, j] = -inf where j > i (for attention scores)"},
  };
  return ops;
}

}  // namespace

const SpecOp* findSpecOp(std::string_view name) {
  for (const SpecOp& op : table())
    if (op.name == name) return &op;
  return nullptr;
}

std::span<const SpecOp> specOps() { return table(); }

std::vector<std::string> specOpNames() {
  std::vector<std::string> names;
  for (const SpecOp& op : table()) names.emplace_back(op.name);
  return names;
}

}  // namespace gradc::frontend
