// The device mesh a step runs on: named axes of ranks ("dp=4", later "dp=2,tp=4"), and the axis
// (group) each collective spans.
//
// A graph's mesh is its attribute "mesh" (the text form below); a graph without one runs on the
// mesh dp=W, W the `world` of its collectives. Every collective names its group, an axis of the
// mesh, in its attribute "group" (a node without one spans "dp"); its `world` is that axis'
// size, its `rank` and `root` positions along it, its `seq` its place in the order that axis'
// ranks issue their collectives. The verifier checks each collective against the mesh; the
// runtime runs each on its group's communicator; an artifact's manifest records the mesh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/status.h"

namespace gradc::ir {

class Graph;
class Node;

// The data-parallel axis: today's only one.
inline constexpr std::string_view kDataParallelAxis = "dp";

struct DeviceMesh {
  // Axes in order, outermost first: name and extent (at least 1).
  std::vector<std::pair<std::string, std::int64_t>> axes;

  // "dp=4" or "dp=2,tp=4": names of letters, digits and '_' (a letter first), each once.
  static Expected<DeviceMesh> parse(std::string_view text);
  static DeviceMesh dataParallel(std::int64_t ranks) { return DeviceMesh{{{std::string(kDataParallelAxis), ranks}}}; }
  std::string toString() const;
  // The extent of axis `name`, nullopt when the mesh has none.
  std::optional<std::int64_t> extent(std::string_view name) const;
  // The product of the extents: the ranks of the run.
  std::int64_t ranks() const;

  // Ranks are numbered row-major over the axes, the last axis innermost (dp=2,tp=4: ranks 0-3
  // are dp 0's tensor-parallel group). The group along `axis` that `rank` belongs to: the ranks
  // whose coordinates on every other axis are `rank`'s, in order along `axis` (so a rank's
  // position in it is its coordinate on the axis). Empty when the mesh has no such axis or
  // `rank` is outside [0, ranks()).
  std::vector<std::int64_t> groupOf(std::string_view axis, std::int64_t rank) const;
  // A name for that group, the same on each of its members and different for every other group
  // of the mesh: "tp/1" (the axis and the group's index among the axis' groups).
  std::string groupName(std::string_view axis, std::int64_t rank) const;
};

// The group a collective node spans: its "group" attribute, "dp" without one.
std::string_view collectiveGroup(const Node& node);

// The graph's mesh: its "mesh" attribute; without one, dp=W for the `world` of its first
// collective (dp=1 for a graph without collectives). An Error for a malformed attribute.
Expected<DeviceMesh> meshOf(const Graph& graph);
void setMesh(Graph& graph, const DeviceMesh& mesh);

}  // namespace gradc::ir
