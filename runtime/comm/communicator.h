// Communicator: the collectives a rank of a data-parallel run needs, over CPU tensors.
//
// One Communicator per process (rank). Every rank must issue the same collectives in the same
// order (the data-parallel pass numbers them, and the executor runs them in that order), as
// with any c10d process group.
//
// Errors. A collective that fails or does not finish within the communicator's timeout comes
// back as an Error whose message names this rank, the collective (the `what` string the
// caller passes, e.g. "all_reduce of gradient bucket 2 (5 tensors, 1.02 MiB) at step 7") and
// the cause, e.g.
//   rank 0: all_reduce of gradient bucket 2 (...) at step 7 failed after 0.3 s: a peer rank
//   exited or was killed (connection closed)
// A call never hangs past the timeout and never throws.
//
// Implementations: GlooCommunicator (runtime/comm/gloo_communicator.h: c10d ProcessGroupGloo with a
// TCPStore rendezvous, CPU tensors). GPU ranks use NCCL (runtime/comm/nccl_communicator.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::runtime {

// A started collective. wait() blocks until it is done (or failed, or timed out); call it
// exactly once. Destroying an unwaited collective waits for it and drops the result.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual Status wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  virtual std::string_view backend() const = 0;  // "gloo" or "nccl"
  virtual std::chrono::milliseconds timeout() const = 0;

  // Starts an in-place sum over all ranks of `buffer` (contiguous). The buffer must stay
  // alive and untouched until wait() returns.
  virtual Expected<std::unique_ptr<PendingCollective>> startAllReduceSum(at::Tensor buffer, std::string what) = 0;

  // Starts the sum over all ranks of `buffer` (contiguous, worldSize() equal blocks along dim
  // 0) of which this rank keeps block rank(): once wait() returns, that block holds the sum of
  // every rank's block rank(); the other blocks are unspecified. Same lifetime rule.
  virtual Expected<std::unique_ptr<PendingCollective>> startReduceScatterSum(at::Tensor buffer, std::string what) = 0;

  // Starts gathering every rank's block of `buffer` (contiguous, worldSize() equal blocks along
  // dim 0) in place: block rank() holds this rank's data; once wait() returns, every block r
  // holds rank r's. Same lifetime rule.
  virtual Expected<std::unique_ptr<PendingCollective>> startAllGather(at::Tensor buffer, std::string what) = 0;

  // Blocking collectives.
  // gather: every rank sends `input` (contiguous, same shape everywhere); on `root`, `output`
  // (contiguous, shape [world * input.size(0), ...], allocated by the caller) receives the
  // inputs in rank order along dim 0. Non-root ranks pass an undefined `output`.
  virtual Status gather(const at::Tensor& input, at::Tensor output, int root, std::string what) = 0;
  // scatter: the inverse. On `root`, `input` is [world * n, ...]; every rank's `output`
  // (contiguous, [n, ...]) receives rows [rank * n, (rank + 1) * n). Non-root ranks pass an
  // undefined `input`.
  virtual Status scatter(const at::Tensor& input, at::Tensor output, int root, std::string what) = 0;
  // all_gather: output (contiguous, [world * input.size(0), ...]) receives every rank's input
  // in rank order along dim 0.
  virtual Status allGather(const at::Tensor& input, at::Tensor output, std::string what) = 0;
  virtual Status broadcast(at::Tensor tensor, int root, std::string what) = 0;
  virtual Status barrier(std::string what) = 0;

  // The communicator of the ranks `members` of this one (ascending, this rank among them), in
  // which each member's rank is its position in `members`: a group of a device mesh
  // (ir/device_mesh.h, runtime/comm/mesh_groups.h). `name` ("tp/1") sets the group apart from
  // every other one made from this communicator (its rendezvous keys are under it). Every member
  // calls it with the same arguments; it blocks until all have (or the timeout). Errors name
  // the run's rank, as this communicator's do.
  virtual Expected<std::unique_ptr<Communicator>> subgroup(const std::string& name,
                                                           const std::vector<int>& members) = 0;
};

// Why `members` cannot be a subgroup of a communicator of `worldSize` ranks in which this one is
// `rank` (not ascending, outside the world, without this rank); empty when they can.
std::string subgroupProblem(const std::vector<int>& members, int rank, int worldSize);

}  // namespace gradc::runtime
