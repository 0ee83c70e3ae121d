// The order every data-parallel rank issues its collectives in: each issuing collective's seq
// attribute. Every rank builds the same graph and runs the same rewrites, so numbering the
// collectives in program order gives every rank the same numbers; each wait takes its start's.
//
// Used after a rewrite inserts collectives: parameter sharding (passes/shard_params.h) and a
// recompute plan that gathers parameters again (passes/remat_strategies.h, regathers).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace gradc::passes {

// Numbers the issuing collectives 0, 1, ... in program order and gives each wait its start's
// number. Returns the nodes whose seq changed, with their previous seq (to undo it).
std::vector<std::pair<ir::Node*, std::int64_t>> renumberCollectives(ir::Graph& graph);

}  // namespace gradc::passes
