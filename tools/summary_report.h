// The human-readable model summary printed by `gradc compile --emit summary`.
#pragma once

#include <cstdint>
#include <string>

#include "ir/byte_format.h"
#include "ir/graph.h"
#include "passes/graph_stats.h"

namespace gradc::tools {

std::string formatSummary(const ir::Graph& graph, const passes::GraphStats& stats);

// 1280000000 -> "1.2 GiB": the one byte formatter (ir/byte_format.h).
using ir::formatBytes;
// 320000000 -> "320,000,000".
inline std::string formatCount(std::int64_t n) { return ir::withThousands(n); }
// 1.23e9 -> "1.23 GFLOP".
std::string formatFlops(std::int64_t flops);

}  // namespace gradc::tools
