// The attention ops' kernel geometry from a node's operand types and attributes (ir/ops_attention.cpp),
// for the backends' workspace rules: the host's tiles, the composed kernels' blocks.
#pragma once

#include <cstddef>

#include "ir/attention_tiles.h"
#include "ir/op_table.h"

namespace gradc::ir {

// q, k, v are the operands from `first` (0: attention; 1: attention_backward, after dout).
AttentionTiling attentionTilingOf(const OpContext& c, std::size_t first);
AttentionChunks attentionChunksOf(const OpContext& c, std::size_t first);

}  // namespace gradc::ir
