// The lowering function of each spec op (referenced by the table in spec_ops.cpp).
// Each takes a Layer whose inputs are resolved and whose attributes are parsed, and returns
// the layer's output value, or nullptr after reporting an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "frontend/layer.h"

namespace gradc::frontend {

// Layers with parameters (lower_params.cpp).
ir::Value* lowerLinear(Layer& layer);
ir::Value* lowerEmbedding(Layer& layer);
ir::Value* lowerPosEmbedding(Layer& layer);
ir::Value* lowerLayerNorm(Layer& layer);
ir::Value* lowerRmsNorm(Layer& layer);
ir::Value* lowerSwiglu(Layer& layer);
ir::Value* lowerParam(Layer& layer);

// x[..., in] -> [..., out] with parameters "<layer>.<prefix>.weight" [out, in] and, when
// `bias`, "<layer>.<prefix>.bias" [out], initialised like torch.nn.Linear, or, with `initStd`,
// the weight from N(0, initStd^2) and the bias zeros (GPT-2's initialisation). An empty prefix
// names them "<layer>.weight" and "<layer>.bias".
ir::Value* linearWithParams(Layer& layer, ir::Value* x, std::string_view prefix, std::int64_t out, bool bias,
                            std::optional<double> initStd = std::nullopt);

// A normalisation layer's weight and bias [d]: parameters "<layer>.weight" (ones) and
// "<layer>.bias" (zeros) when its `affine` flag is set, else constant ones and zeros; a nullptr
// second after an error.
std::pair<ir::Value*, ir::Value*> normAffine(Layer& layer, std::int64_t d);

// The layer's `attr` (a standard deviation) when given; an error when it is not positive.
// nullopt and `ok` when absent.
std::optional<double> initStdAttr(Layer& layer, std::string_view attr, bool& ok);

// Composite layers, lowered to primitive ops (lower_attention.cpp, lower_lstm.cpp).
ir::Value* lowerAttention(Layer& layer);
ir::Value* lowerLstm(Layer& layer);

// Image layers (lower_conv.cpp).
ir::Value* lowerConv2d(Layer& layer);
ir::Value* lowerBatchNorm(Layer& layer);
ir::Value* lowerMaxPool2d(Layer& layer);
ir::Value* lowerAvgPool2d(Layer& layer);
ir::Value* lowerAdaptiveAvgPool2d(Layer& layer);
ir::Value* lowerFlatten(Layer& layer);

// Parameter-free layers (lower_tensor_ops.cpp).
ir::Value* lowerSameOp(Layer& layer);  // the IR op of the same name, no attributes
ir::Value* lowerGelu(Layer& layer);
ir::Value* lowerScale(Layer& layer);
ir::Value* lowerSoftmax(Layer& layer);  // softmax and log_softmax
ir::Value* lowerDropout(Layer& layer);
ir::Value* lowerReshape(Layer& layer);
ir::Value* lowerTranspose(Layer& layer);
ir::Value* lowerReduction(Layer& layer);  // sum and mean
ir::Value* lowerConcat(Layer& layer);
ir::Value* lowerSplit(Layer& layer);

}  // namespace gradc::frontend
