#include "runtime/comm/mesh_groups.h"

#include <algorithm>

namespace gradc::runtime {

std::string subgroupProblem(const std::vector<int>& members, int rank, int worldSize) {
  if (members.empty()) return "the group has no members";
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= worldSize)
      return "rank " + std::to_string(members[i]) + " is not one of the " + std::to_string(worldSize) + " ranks";
    if (i > 0 && members[i] <= members[i - 1]) return "the members are not in ascending order, each once";
  }
  if (std::find(members.begin(), members.end(), rank) == members.end())
    return "this rank (" + std::to_string(rank) + ") is not one of its members";
  return {};
}

Expected<MeshGroups> MeshGroups::join(Communicator& world, const ir::DeviceMesh& mesh) {
  if (mesh.ranks() != world.worldSize())
    return Error{"the mesh " + mesh.toString() + " has " + std::to_string(mesh.ranks()) + " ranks, but the run has " +
                 std::to_string(world.worldSize())};
  MeshGroups out;
  for (const auto& [axis, extent] : mesh.axes) {
    if (extent == world.worldSize()) {
      out.groups_.emplace_back(axis, &world);
      continue;
    }
    const std::vector<std::int64_t> ranks = mesh.groupOf(axis, world.rank());
    const std::vector<int> members(ranks.begin(), ranks.end());
    Expected<std::unique_ptr<Communicator>> sub = world.subgroup(mesh.groupName(axis, world.rank()), members);
    if (!sub) return sub.error();
    out.groups_.emplace_back(axis, sub->get());
    out.owned_.push_back(std::move(*sub));
  }
  return out;
}

Communicator* MeshGroups::group(std::string_view axis) const {
  for (const auto& [name, comm] : groups_)
    if (name == axis) return comm;
  return nullptr;
}

void MeshGroups::addTo(CollectiveContext& context) const {
  for (const auto& [axis, comm] : groups_) context.addGroup(axis, *comm);
}

}  // namespace gradc::runtime
