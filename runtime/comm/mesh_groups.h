// The communicators of one rank's groups on the device mesh its step runs on (ir/device_mesh.h):
// for every axis, the ranks that differ from this one only along that axis. An axis spanning
// every rank (dp on the mesh dp=N, today's only mesh) is the run's communicator itself; each
// other axis gets a subgroup of it (Communicator::subgroup: Gloo over the same store under the
// group's name, NCCL with its own unique id), made in the mesh's axis order on every rank so
// that every rendezvous finds its members. The collective kernels find a node's communicator
// through CollectiveContext::commFor (its "group" attribute).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/device_mesh.h"
#include "ir/status.h"
#include "runtime/comm/collective_context.h"
#include "runtime/comm/communicator.h"

namespace gradc::runtime {

class MeshGroups {
 public:
  // Joins this rank's group along every axis of `mesh`; `world`'s ranks must be the mesh's.
  static Expected<MeshGroups> join(Communicator& world, const ir::DeviceMesh& mesh);

  // This rank's communicator along `axis`; null when the mesh has no such axis.
  Communicator* group(std::string_view axis) const;
  // Every axis' communicator, for the collective kernels.
  void addTo(CollectiveContext& context) const;

 private:
  std::vector<std::pair<std::string, Communicator*>> groups_;  // by axis, in the mesh's order
  std::vector<std::unique_ptr<Communicator>> owned_;            // the subgroups made
};

}  // namespace gradc::runtime
