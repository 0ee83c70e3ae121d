// A conv2d node's problem as the host's kernels see it: one definition for the host's workspace
// rules (runtime/host/host_target.cpp) and its kernels (runtime/kernels/onednn_conv.cpp,
// kernels_conv.cpp), so both ask the same question and get the same answer.
//
// Two kernels: im2col + GEMM (every dtype; ir/conv_problem.h), whose bf16 and f16 products get
// temporaries of their own beside the columns; and, in f32 where oneDNN has a blocked kernel,
// oneDNN's, run in chunks of samples no larger than keeps its workspace within the im2col
// kernel's (or one sample's, when that is larger: its weights copy).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ir/attribute.h"
#include "ir/op_table.h"
#include "ir/tensor_type.h"
#include "onednn/conv.h"

namespace gradc::runtime::host {

// x [N, C, H, W], w [O, C / groups, kh, kw], y [N, O, OH, OW]; nullopt when the attributes do
// not read (the verifier reports those).
std::optional<onednn::ConvShape> oneDnnConvShape(const ir::AttrMap& attrs, const ir::Shape& x, const ir::Shape& w,
                                                 const ir::Shape& y, bool bias);

// The temporaries each matrix product of the im2col kernel gets in bf16 and f16
// (productWorkspace: oneDNN's scratchpad or the widened products' panels): the most any of the
// pass's products needs, for a full chunk of samples and for the last one; the kernel hands
// every product this many bytes, beside its columns. 0 in other dtypes. `samples` N,
// `outChannels` O/g, `columns` C/g*kh*kw, `pixels` OH*OW.
std::int64_t im2colProductScratch(onednn::ConvPass pass, ir::DType dtype, std::int64_t samples,
                                  std::int64_t outChannels, std::int64_t columns, std::int64_t pixels, int threads);

// The oneDNN pass the node runs: its problem, its chunk of samples and workspace; nullopt: the
// im2col kernel runs (not f32, or no blocked kernel). x, w, y as for conv2d, whichever pass.
struct OneDnnConvPass {
  onednn::ConvShape shape;
  onednn::ConvChunking chunking;
};
std::optional<OneDnnConvPass> oneDnnConvPass(const ir::AttrMap& attrs, onednn::ConvPass pass, const ir::TensorType& x,
                                             const ir::TensorType& w, const ir::TensorType& y, bool bias, int threads);

// The host's rules for conv2d, conv2d_input_grad and conv2d_weight_grad: oneDNN's workspace for
// the pass where it runs there, else the im2col kernel's columns and its products' temporaries.
std::int64_t workspaceConv2d(const ir::OpContext& c, std::span<const ir::TensorType> results);
std::int64_t workspaceConv2dInputGrad(const ir::OpContext& c, std::span<const ir::TensorType> results);
std::int64_t workspaceConv2dWeightGrad(const ir::OpContext& c, std::span<const ir::TensorType> results);

}  // namespace gradc::runtime::host
