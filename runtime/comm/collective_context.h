// What the collective kernels (runtime/kernels/kernels_collective.cpp) share during one run of a
// rank's graph: the communicator of each group of the mesh (ir/device_mesh.h) this rank belongs
// to, the collectives started and not yet waited for (all_reduce_start -> all_reduce_wait), and
// the time spent blocked on communication.
//
// One CollectiveContext per rank, passed to Executor::run through RunContext::collectives.
// A graph with collective nodes run without one fails at its first collective with an error
// saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ir/device_mesh.h"
#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/comm/communicator.h"

namespace gradc::runtime {

class CollectiveContext {
 public:
  // The mesh dp=N: every rank in the one data-parallel group, whose communicator is `comm`.
  explicit CollectiveContext(Communicator& comm) { groups_.emplace(ir::kDataParallelAxis, &comm); }

  // The communicator of this rank's group along `axis` (another axis of the mesh).
  void addGroup(std::string axis, Communicator& comm) { groups_.insert_or_assign(std::move(axis), &comm); }
  // The communicator of the group a collective node spans (its "group"); an Error naming the
  // group when this rank has none for it.
  Expected<Communicator*> commFor(const ir::Node& node);

  // Records a started collective under its starting node.
  void started(const ir::Node* start, std::unique_ptr<PendingCollective> pending);
  // Waits for the collective started by `start`; the blocked time counts as communication wait.
  Status wait(const ir::Node* start);
  // Runs a blocking collective, counting its time as communication wait.
  template <class F>
  Status blocking(F&& call) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = call();
    waitSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
  }

  // The first communication failure of this rank (already worded with rank, collective and
  // step, runtime/comm/communicator.h), recorded by the kernel that met it; the trainer reports it
  // as it is rather than wrapped in the failing node's description.
  void recordFailure(const std::string& message) {
    if (failure_.empty()) failure_ = message;
  }
  const std::string& failure() const { return failure_; }

  // Seconds spent blocked in waits and blocking collectives since construction.
  double waitSeconds() const { return waitSeconds_; }
  // Collectives started and not waited for (0 after every complete run). After a failed run,
  // destroying the context waits for each (bounded by the communicator's timeout), so no
  // communication still writes into freed buffers.
  size_t pending() const { return pending_.size(); }

  // "all_reduce of gradient bucket 2 (5 tensors, 1.02 MiB) at step 7", "gather of f32[8, 128,
  // 256] at step 3", "... over the tp group at step 2" (a group other than dp): the collective's
  // description for error messages.
  static std::string describe(const ir::Node& node, std::int64_t step);

 private:
  std::map<std::string, Communicator*, std::less<>> groups_;
  std::map<const ir::Node*, std::unique_ptr<PendingCollective>> pending_;
  double waitSeconds_ = 0;
  std::string failure_;
};

}  // namespace gradc::runtime
