// ProcessGroupGloo's declaration is compiled only with USE_C10D_GLOO; the Debian LibTorch is
// built with it (the symbols are in libtorch_cpu.so, which links libgloo.so).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include "runtime/comm/gloo_communicator.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <algorithm>
#include <csignal>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "runtime/comm/comm_error.h"
#include "runtime/comm/tcp_kv_store.h"
#include "runtime/core/c10_message.h"

namespace gradc::runtime {

using Clock = std::chrono::steady_clock;

struct GlooCommunicator::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> options;  // the transport, for subgroups
};

namespace {

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// How long wait() blocks at most: Gloo's own timeout normally fires first (with a more precise
// message); this only bounds waits on work queued behind a stuck collective.
std::chrono::milliseconds waitLimit(std::chrono::milliseconds timeout) {
  return timeout + std::chrono::milliseconds(500);
}

// The process group's worker thread still holds a work (and through it the tensors) for a
// moment after completing it. Waiting for it to let go makes the tensors' release exact: they
// are freed when the caller drops them, as the memory plan assumes, not whenever the worker
// thread gets round to it (briefly: bounded at 1 s). `work` must be the caller's only reference.
void awaitRelease(const c10::intrusive_ptr<c10d::Work>& work) {
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  while (work.use_count() > 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// Waits for `work` and turns any failure into the documented Error.
Status finish(const c10::intrusive_ptr<c10d::Work>& work, int rank, std::chrono::milliseconds timeout,
              const std::string& what, Clock::time_point start) {
  Status status = Status::success();
  try {
    work->wait(waitLimit(timeout));
  } catch (const std::exception& e) {
    status = comm::collectiveError(rank, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout));
  }
  if (status) awaitRelease(work);
  return status;
}

// One started collective: its works (one for a process-group collective; a send and a receive
// per peer for the all-gather), waited for together, and the tensors they hold by reference.
class GlooPending final : public PendingCollective {
 public:
  GlooPending(at::Tensor buffer, int rank, std::chrono::milliseconds timeout, std::string what, Clock::time_point start)
      : buffer_(std::move(buffer)), rank_(rank), timeout_(timeout), what_(std::move(what)), start_(start) {}
  ~GlooPending() override {
    if (!works_.empty()) (void)wait();
  }
  void add(c10::intrusive_ptr<c10d::Work> work) { works_.push_back(std::move(work)); }
  // A point-to-point message's tensor list, alive until the wait (send/recv take it by reference).
  std::vector<at::Tensor>& message(at::Tensor t) { return messages_.emplace_back(std::vector<at::Tensor>{std::move(t)}); }
  Status wait() override {
    if (works_.empty()) return Error{"rank " + std::to_string(rank_) + ": " + what_ + ": wait() called twice"};
    Status status = Status::success();
    for (const auto& work : works_)
      if (status) status = finish(work, rank_, timeout_, what_, start_);
    works_.clear();
    return status;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::deque<std::vector<at::Tensor>> messages_;
  at::Tensor buffer_;  // kept alive until the collective is done
  int rank_;
  std::chrono::milliseconds timeout_;
  std::string what_;
  Clock::time_point start_;
};

// Input checks shared by the collectives; an empty string means fine.
std::string checkTensor(const at::Tensor& t, const char* name) {
  if (!t.defined()) return std::string(name) + " is undefined";
  if (!t.device().is_cpu()) return std::string(name) + " is not a CPU tensor (Gloo works on CPU tensors)";
  if (!t.is_contiguous()) return std::string(name) + " is not contiguous";
  return {};
}

Error argumentError(int rank, const std::string& what, const std::string& problem) {
  return Error{"rank " + std::to_string(rank) + ": " + what + ": " + problem};
}

// Views of `stacked` ([world * n, ...]) for each rank's n rows; they share its storage.
std::vector<at::Tensor> rowBlocks(const at::Tensor& stacked, int world) {
  const int64_t n = stacked.size(0) / world;
  std::vector<at::Tensor> blocks;
  blocks.reserve(world);
  for (int r = 0; r < world; ++r) blocks.push_back(stacked.narrow(0, r * n, n));
  return blocks;
}

// An empty string when `stacked` is [world * input.size(0), rest of input's shape...] with
// input's dtype.
std::string checkStacked(const at::Tensor& stacked, const at::Tensor& block, int world, const char* name) {
  std::string problem = checkTensor(stacked, name);
  if (!problem.empty()) return problem;
  if (block.dim() == 0) return "tensors must have at least one dimension";
  auto expected = block.sizes().vec();
  expected[0] *= world;
  if (stacked.sizes().vec() != expected || stacked.scalar_type() != block.scalar_type()) {
    return std::string(name) + " has shape " + c10::str(stacked.sizes()) + " and dtype " +
           std::string(c10::toString(stacked.scalar_type())) + "; expected " + c10::str(c10::IntArrayRef(expected)) +
           " and dtype " + std::string(c10::toString(block.scalar_type()));
  }
  return {};
}

}  // namespace

GlooCommunicator::GlooCommunicator(std::unique_ptr<Impl> impl, int rank, int worldSize,
                                   std::chrono::milliseconds timeout, int messageRank)
    : impl_(std::move(impl)), rank_(rank), worldSize_(worldSize), timeout_(timeout), messageRank_(messageRank) {}

GlooCommunicator::~GlooCommunicator() {
  // The group first (it joins its worker threads), then the store it used.
  if (impl_) {
    try {
      impl_->group.reset();
      impl_->store.reset();
    } catch (...) {
    }
  }
}

Expected<std::unique_ptr<Communicator>> GlooCommunicator::create(const DistEnv& env, std::chrono::milliseconds timeout) {
  if (env.worldSize < 1 || env.rank < 0 || env.rank >= env.worldSize) {
    return Error{"invalid distributed environment: rank " + std::to_string(env.rank) + " of world size " +
                 std::to_string(env.worldSize)};
  }
  // A peer that dies closes its sockets; a write to one would raise SIGPIPE and kill this rank
  // without a word. Ignored, the write fails with EPIPE and the collective reports the peer.
  std::signal(SIGPIPE, SIG_IGN);
  const auto start = Clock::now();
  auto store = connectTcpStore(env, timeout);
  if (!store) return store.error();

  auto impl = std::make_unique<Impl>();
  impl->store = *store;
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // Loopback for single-host runs; otherwise the address this host resolves to.
    const bool local = env.masterAddr == "127.0.0.1" || env.masterAddr == "localhost";
    options->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 2;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gradc/gloo", impl->store);
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, env.rank, env.worldSize, options);
    impl->options = options;
  } catch (const std::exception& e) {
    std::string message = exceptionMessage(e);
    std::string cause = comm::containsNoCase(message, "timed out") || comm::containsNoCase(message, "timeout")
                            ? "not every rank joined within the " + comm::formatSeconds(timeout.count() / 1000.0) +
                                  " s timeout (are all " + std::to_string(env.worldSize) +
                                  " ranks started, with the same MASTER_ADDR and MASTER_PORT?)"
                            : comm::causeFromMessage(message, timeout);
    return comm::collectiveError(env.rank, "rendezvous of " + std::to_string(env.worldSize) + " ranks at " +
                                               env.masterAddr + ":" + std::to_string(env.masterPort),
                                 secondsSince(start), cause);
  }
  return std::unique_ptr<Communicator>(
      new GlooCommunicator(std::move(impl), env.rank, env.worldSize, timeout, env.rank));
}

Expected<std::unique_ptr<Communicator>> GlooCommunicator::subgroup(const std::string& name,
                                                                    const std::vector<int>& members) {
  const std::string what = "rendezvous of group " + name + " (" + std::to_string(members.size()) + " ranks)";
  if (std::string problem = subgroupProblem(members, rank_, worldSize_); !problem.empty())
    return argumentError(messageRank_, what, problem);
  const int groupRank = static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  const int groupSize = static_cast<int>(members.size());
  const auto start = Clock::now();
  auto impl = std::make_unique<Impl>();
  impl->store = impl_->store;
  impl->options = impl_->options;
  try {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gradc/gloo/" + name, impl->store);
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, groupRank, groupSize, impl->options);
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start),
                                 comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
  return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(impl), groupRank, groupSize, timeout_, messageRank_));
}

Expected<std::unique_ptr<PendingCollective>> GlooCommunicator::startAllReduceSum(at::Tensor buffer, std::string what) {
  if (auto problem = checkTensor(buffer, "the buffer"); !problem.empty()) return argumentError(messageRank_, what, problem);
  if (buffer.scalar_type() == at::kBFloat16)
    return argumentError(messageRank_, what, "Gloo cannot sum bf16 tensors (f32, f64 and f16 it can)");
  const auto start = Clock::now();
  try {
    std::vector<at::Tensor> tensors{buffer};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.timeout = timeout_;
    auto pending = std::make_unique<GlooPending>(buffer, messageRank_, timeout_, std::move(what), start);
    pending->add(impl_->group->allreduce(tensors, options));
    return std::unique_ptr<PendingCollective>(std::move(pending));
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

Expected<std::unique_ptr<PendingCollective>> GlooCommunicator::startReduceScatterSum(at::Tensor buffer,
                                                                                     std::string what) {
  if (buffer.defined() && (buffer.dim() == 0 || buffer.size(0) % worldSize_ != 0))
    return argumentError(messageRank_, what, "the buffer's leading extent is not a multiple of the " +
                                          std::to_string(worldSize_) + " ranks");
  return startAllReduceSum(std::move(buffer), std::move(what));
}

// Each rank's block goes straight to every other rank, which receives it straight into its
// block of the buffer: point-to-point messages, no staging copy (as allGather below).
Expected<std::unique_ptr<PendingCollective>> GlooCommunicator::startAllGather(at::Tensor buffer, std::string what) {
  if (auto problem = checkTensor(buffer, "the buffer"); !problem.empty()) return argumentError(messageRank_, what, problem);
  if (buffer.dim() == 0 || buffer.size(0) % worldSize_ != 0)
    return argumentError(messageRank_, what, "the buffer's leading extent is not a multiple of the " +
                                          std::to_string(worldSize_) + " ranks");
  const int tag = nextTag();
  const auto start = Clock::now();
  try {
    auto pending = std::make_unique<GlooPending>(buffer, messageRank_, timeout_, what, start);
    const std::vector<at::Tensor> blocks = rowBlocks(buffer, worldSize_);
    for (int r = 0; r < worldSize_; ++r) {
      if (r == rank_) continue;
      pending->add(impl_->group->send(pending->message(blocks[static_cast<size_t>(rank_)]), r, tag));
      pending->add(impl_->group->recv(pending->message(blocks[static_cast<size_t>(r)]), r, tag));
    }
    return std::unique_ptr<PendingCollective>(std::move(pending));
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

// gather and scatter move each rank's rows with point-to-point messages straight between the
// rows of the root's tensor and the other ranks' tensors: no staging copy of the whole data
// (c10d's own gather and scatter stage it in one flat temporary). Every rank calls them in the
// same order, so a per-communicator counter gives matching message tags.
Status GlooCommunicator::gather(const at::Tensor& input, at::Tensor output, int root, std::string what) {
  if (root < 0 || root >= worldSize_) return argumentError(messageRank_, what, "root " + std::to_string(root) + " is not a rank");
  if (auto problem = checkTensor(input, "the input"); !problem.empty()) return argumentError(messageRank_, what, problem);
  if (rank_ == root) {
    if (auto problem = checkStacked(output, input, worldSize_, "the output"); !problem.empty())
      return argumentError(messageRank_, what, problem);
  }
  return moveRows(/*toRoot=*/true, output, input, root, what);
}

Status GlooCommunicator::scatter(const at::Tensor& input, at::Tensor output, int root, std::string what) {
  if (root < 0 || root >= worldSize_) return argumentError(messageRank_, what, "root " + std::to_string(root) + " is not a rank");
  if (auto problem = checkTensor(output, "the output"); !problem.empty()) return argumentError(messageRank_, what, problem);
  if (rank_ == root) {
    if (auto problem = checkStacked(input, output, worldSize_, "the input"); !problem.empty())
      return argumentError(messageRank_, what, problem);
  }
  return moveRows(/*toRoot=*/false, input, output, root, what);
}

Status GlooCommunicator::moveRows(bool toRoot, const at::Tensor& stacked, const at::Tensor& block, int root,
                                  const std::string& what) {
  const int tag = nextTag();
  const auto start = Clock::now();
  try {
    std::vector<std::vector<at::Tensor>> messages;  // send/recv take their tensors by reference
    messages.reserve(static_cast<size_t>(worldSize_));
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    auto transfer = [&](const at::Tensor& rows, int peer) {
      messages.push_back({rows});
      works.push_back(toRoot == (rank_ == root) ? impl_->group->recv(messages.back(), peer, tag)
                                                : impl_->group->send(messages.back(), peer, tag));
    };
    if (rank_ == root) {
      std::vector<at::Tensor> blocks = rowBlocks(stacked, worldSize_);
      for (int r = 0; r < worldSize_; ++r)
        if (r != root) transfer(blocks[static_cast<size_t>(r)], r);
      at::Tensor own = blocks[static_cast<size_t>(root)];
      if (toRoot) own.copy_(block);
      else at::Tensor(block).copy_(own);
    } else {
      transfer(block, root);
    }
    for (const auto& work : works)
      if (Status s = finish(work, messageRank_, timeout_, what, start); !s) return s;
    return Status::success();
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

// Every rank sends its block straight to every other rank and receives theirs straight into
// the rows of `output`, with point-to-point messages: no staging copy of the whole output
// (c10d's allgather stages one), so an all-gather inside a step allocates nothing beyond its
// output.
Status GlooCommunicator::allGather(const at::Tensor& input, at::Tensor output, std::string what) {
  if (auto problem = checkTensor(input, "the input"); !problem.empty()) return argumentError(messageRank_, what, problem);
  if (auto problem = checkStacked(output, input, worldSize_, "the output"); !problem.empty())
    return argumentError(messageRank_, what, problem);
  const int tag = nextTag();
  const auto start = Clock::now();
  try {
    std::vector<at::Tensor> blocks = rowBlocks(output, worldSize_);
    std::vector<std::vector<at::Tensor>> messages;  // send/recv take their tensors by reference
    messages.reserve(2 * static_cast<size_t>(worldSize_));
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (int r = 0; r < worldSize_; ++r) {
      if (r == rank_) continue;
      messages.push_back({input});
      works.push_back(impl_->group->send(messages.back(), r, tag));
      messages.push_back({blocks[static_cast<size_t>(r)]});
      works.push_back(impl_->group->recv(messages.back(), r, tag));
    }
    blocks[static_cast<size_t>(rank_)].copy_(input);
    for (const auto& work : works)
      if (Status s = finish(work, messageRank_, timeout_, what, start); !s) return s;
    return Status::success();
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

Status GlooCommunicator::broadcast(at::Tensor tensor, int root, std::string what) {
  if (root < 0 || root >= worldSize_) return argumentError(messageRank_, what, "root " + std::to_string(root) + " is not a rank");
  if (auto problem = checkTensor(tensor, "the tensor"); !problem.empty()) return argumentError(messageRank_, what, problem);
  const auto start = Clock::now();
  try {
    std::vector<at::Tensor> tensors{tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = timeout_;
    return finish(impl_->group->broadcast(tensors, options), messageRank_, timeout_, what, start);
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

Status GlooCommunicator::barrier(std::string what) {
  const auto start = Clock::now();
  try {
    c10d::BarrierOptions options;
    options.timeout = timeout_;
    return finish(impl_->group->barrier(options), messageRank_, timeout_, what, start);
  } catch (const std::exception& e) {
    return comm::collectiveError(messageRank_, what, secondsSince(start), comm::causeFromMessage(exceptionMessage(e), timeout_));
  }
}

}  // namespace gradc::runtime
