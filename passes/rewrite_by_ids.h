// A recompute rewrite (passes/memory/rewrite_plan.h) written in node and value ids instead of pointers,
// so that the rewrite one graph's planner chose is applied to another graph built the same way:
// the step of another data-parallel rank, whose nodes and values carry the same ids, ops, types
// and wiring and differ only in attributes (a rank's dropout stream, the shards it owns).
//
// Invariants:
//   - structureOf(a) == structureOf(b) when a and b have the same inputs, parameters, outputs
//     and nodes -- in the same order, with the same ids, ops, phases, operand ids and result
//     types; attributes are not part of the structure.
//   - bindRewrite(byIds(plan, g), h) for such an h is `plan` with every pointer into g replaced
//     by the node or value of h with its id; the clones it makes copy h's attributes.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/memory/rewrite_plan.h"

namespace gradc::passes::remat {

struct SourceById {
  std::uint32_t value = 0;  // id of an original value, when clone < 0
  int clone = -1;
  unsigned result = 0;
};
struct RewireById {
  std::uint32_t node;
  unsigned operand;
  SourceById to;
};
struct RewriteByIds {
  struct Clone {
    std::uint32_t of;  // node id
    size_t before;     // program position, as CloneOp::before
    std::uint32_t first;
  };
  std::vector<Clone> clones;
  std::vector<SourceById> operands;
  std::vector<RewireById> rewires;
  std::int64_t recomputeFlops = 0;
  bool empty() const { return clones.empty() && rewires.empty(); }
};

RewriteByIds byIds(const RewritePlan& plan);
// The plan on `graph`'s nodes and values; an internal error when an id is not in `graph` or a
// clone's operand count differs (the graph is not built like the one the plan was made for).
Expected<RewritePlan> bindRewrite(const RewriteByIds& plan, const ir::Graph& graph);

// A fingerprint of the graph's structure as defined above (FNV-1a over it).
std::uint64_t structureOf(const ir::Graph& graph);

}  // namespace gradc::passes::remat
