// Communicator over c10d's ProcessGroupGloo (CPU tensors), with a TCPStore rendezvous at
// MASTER_ADDR:MASTER_PORT (see runtime/comm/dist_env.h for who hosts the store).
//
// The communicator timeout is both the store timeout (rendezvous) and Gloo's per-operation
// timeout; wait() also stops waiting shortly after it, so no call hangs past the timeout even
// when a peer is stopped (SIGSTOP) rather than dead. Every c10d/Gloo exception becomes an
// Error worded as described in runtime/comm/communicator.h. create() makes the process ignore
// SIGPIPE, so that a write to a dead peer's socket is an error, not a silent death.
#pragma once

#include <chrono>
#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/comm/dist_env.h"

namespace gradc::runtime {

class GlooCommunicator final : public Communicator {
 public:
  // Rendezvous with every rank of `env` (blocks until all have joined, or the timeout).
  static Expected<std::unique_ptr<Communicator>> create(const DistEnv& env, std::chrono::milliseconds timeout);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int worldSize() const override { return worldSize_; }
  std::string_view backend() const override { return "gloo"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  Expected<std::unique_ptr<PendingCollective>> startAllReduceSum(at::Tensor buffer, std::string what) override;
  // LibTorch 1.13's ProcessGroupGloo has no reduce_scatter: the whole buffer is all-reduced
  // (twice a reduce-scatter's traffic, the same memory).
  Expected<std::unique_ptr<PendingCollective>> startReduceScatterSum(at::Tensor buffer, std::string what) override;
  Expected<std::unique_ptr<PendingCollective>> startAllGather(at::Tensor buffer, std::string what) override;
  Status gather(const at::Tensor& input, at::Tensor output, int root, std::string what) override;
  Status scatter(const at::Tensor& input, at::Tensor output, int root, std::string what) override;
  Status allGather(const at::Tensor& input, at::Tensor output, std::string what) override;
  Status broadcast(at::Tensor tensor, int root, std::string what) override;
  Status barrier(std::string what) override;
  // Another ProcessGroupGloo over the same store, its keys under the group's name.
  Expected<std::unique_ptr<Communicator>> subgroup(const std::string& name, const std::vector<int>& members) override;

  struct Impl;

 private:
  // `messageRank`: the run's rank, which errors name (a subgroup's rank is its position in it).
  GlooCommunicator(std::unique_ptr<Impl> impl, int rank, int worldSize, std::chrono::milliseconds timeout,
                   int messageRank);

  // gather (toRoot) or scatter: rows between the root's `stacked` [world * n, ...] and every
  // rank's `block` [n, ...], as point-to-point messages.
  Status moveRows(bool toRoot, const at::Tensor& stacked, const at::Tensor& block, int root, const std::string& what);
  // Tags of gather/scatter messages: every rank counts the same calls in the same order.
  int nextTag() { return static_cast<int>(tagCounter_++ % (1u << 30)); }

  std::unique_ptr<Impl> impl_;
  unsigned tagCounter_ = 0;
  int rank_;
  int worldSize_;
  std::chrono::milliseconds timeout_;
  int messageRank_;
};

}  // namespace gradc::runtime
