// A conv2d node's problem as its kernels see it, from the types of its input, weights and
// output and its window attributes: one definition for the op table's workspace rules
// (ir/ops_conv.cpp) and the runtime's kernels (runtime/kernels/onednn_conv.cpp, kernels_conv.cpp), so
// both ask the same question and get the same answer.
//
// Two kernels: im2col + GEMM (every dtype), whose workspace is one sample's column matrix (or a
// chunk's, for small outputs); and, in f32 where oneDNN has a blocked kernel, oneDNN's, run in
// chunks of samples no larger than keeps its workspace within the im2col kernel's (or one
// sample's, when that is larger: its weights copy).
#pragma once

#include <optional>

#include "ir/attribute.h"
#include "ir/tensor_type.h"
#include "onednn/conv.h"

namespace gradc::ir {

// x [N, C, H, W], w [O, C / groups, kh, kw], y [N, O, OH, OW]; nullopt when the attributes do
// not read (the verifier reports those).
std::optional<onednn::ConvShape> oneDnnConvShape(const AttrMap& attrs, const Shape& x, const Shape& w, const Shape& y,
                                                 bool bias);

// The im2col kernel's workspace for a pass with weights w and (forward) output y.
std::int64_t im2colWorkspaceBytes(const AttrMap& attrs, const TensorType& w, const TensorType& y);

// The temporaries each matrix product of the im2col kernel gets in bf16 and f16
// (rules::productWorkspace: oneDNN's scratchpad or the widened products' panels): the most any
// of the pass's products needs, for a full chunk of samples and for the last one; the kernel
// hands every product this many bytes, beside its columns. 0 in other dtypes. `samples` N,
// `outChannels` O/g, `columns` C/g*kh*kw, `pixels` OH*OW.
std::int64_t im2colProductScratch(onednn::ConvPass pass, DType dtype, std::int64_t samples, std::int64_t outChannels,
                                  std::int64_t columns, std::int64_t pixels, int threads);

// The oneDNN pass the node runs: its problem, its chunk of samples and workspace; nullopt: the
// im2col kernel runs (not f32, or no blocked kernel). x, w, y as for conv2d, whichever pass.
struct OneDnnConvPass {
  onednn::ConvShape shape;
  onednn::ConvChunking chunking;
};
std::optional<OneDnnConvPass> oneDnnConvPass(const AttrMap& attrs, onednn::ConvPass pass, const TensorType& x,
                                             const TensorType& w, const TensorType& y, bool bias, int threads);

}  // namespace gradc::ir
