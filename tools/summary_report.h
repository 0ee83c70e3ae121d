// The human-readable model summary printed by `gradc compile --emit summary`.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "passes/graph_stats.h"

namespace gradc::tools {

std::string formatSummary(const ir::Graph& graph, const passes::GraphStats& stats);

// 1280000000 -> "1.28 GB" (decimal units, as in the literature on memory footprints).
std::string formatBytes(std::int64_t bytes);
// 320000000 -> "320,000,000".
std::string formatCount(std::int64_t n);
// 1.23e9 -> "1.23 GFLOP".
std::string formatFlops(std::int64_t flops);

}  // namespace gradc::tools
