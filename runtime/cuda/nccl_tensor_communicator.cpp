#include "runtime/cuda/nccl_tensor_communicator.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/nccl_communicator.h"
#include "runtime/comm/tcp_kv_store.h"

namespace gradc::runtime {
namespace {

std::optional<NcclDType> ncclTypeOf(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return NcclDType::Float32;
    case at::kDouble: return NcclDType::Float64;
    case at::kHalf: return NcclDType::Float16;
    case at::kBFloat16: return NcclDType::BFloat16;
    case at::kInt: return NcclDType::Int32;
    case at::kLong: return NcclDType::Int64;
    case at::kByte: return NcclDType::UInt8;
    default: return std::nullopt;
  }
}

Error argumentError(int rank, const std::string& what, const std::string& problem) {
  return Error{"rank " + std::to_string(rank) + ": " + what + ": " + problem};
}

class NcclPending final : public PendingCollective {
 public:
  NcclPending(std::unique_ptr<NcclCommunicator::Pending> pending, at::Tensor keepAlive)
      : pending_(std::move(pending)), keepAlive_(std::move(keepAlive)) {}
  Status wait() override { return pending_->wait(); }

 private:
  std::unique_ptr<NcclCommunicator::Pending> pending_;
  at::Tensor keepAlive_;
};

// Joins the NCCL communicator of `worldSize` ranks (this one `rank`) on GPU `device`, its unique
// id under `key` in `store`, with a communication stream of its own.
Expected<std::unique_ptr<Communicator>> joinNccl(int rank, int worldSize, int device,
                                                 std::shared_ptr<KeyValueStore> store,
                                                 std::chrono::milliseconds timeout, const std::string& key);

class NcclTensorCommunicator final : public Communicator {
 public:
  NcclTensorCommunicator(std::unique_ptr<NcclCommunicator> nccl, std::shared_ptr<KeyValueStore> store, int device,
                         cudaStream_t commStream)
      : nccl_(std::move(nccl)), store_(std::move(store)), device_(device), commStream_(commStream) {}
  ~NcclTensorCommunicator() override {
    nccl_.reset();  // the communicator first, then the stream it enqueued on
    if (commStream_) (void)cudaStreamDestroy(commStream_);
  }

  int rank() const override { return nccl_->rank(); }
  int worldSize() const override { return nccl_->worldSize(); }
  std::string_view backend() const override { return "nccl"; }
  std::chrono::milliseconds timeout() const override { return nccl_->timeout(); }

  Expected<std::unique_ptr<PendingCollective>> startAllReduceSum(at::Tensor buffer, std::string what) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    Expected<NcclDType> type = check(buffer, what);
    if (!type) return type.error();
    if (Status s = commAfterCompute(what); !s) return s.error();
    Expected<std::unique_ptr<NcclCommunicator::Pending>> p =
        nccl_->startAllReduceSum(buffer.data_ptr(), static_cast<std::size_t>(buffer.numel()), *type, commStream_, what);
    if (!p) return p.error();
    return std::unique_ptr<PendingCollective>(std::make_unique<NcclPending>(std::move(*p), std::move(buffer)));
  }

  Expected<std::unique_ptr<PendingCollective>> startReduceScatterSum(at::Tensor buffer, std::string what) override {
    return startBlocked(std::move(buffer), std::move(what), &NcclCommunicator::startReduceScatterSum);
  }

  Expected<std::unique_ptr<PendingCollective>> startAllGather(at::Tensor buffer, std::string what) override {
    return startBlocked(std::move(buffer), std::move(what), &NcclCommunicator::startAllGather);
  }

  Status allGather(const at::Tensor& input, at::Tensor output, std::string what) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    at::Tensor in = onDevice(input), out = onDevice(output);
    Expected<NcclDType> type = check(in, what);
    if (!type) return type.error();
    if (out.numel() != in.numel() * worldSize())
      return argumentError(rank(), what, "the output does not hold world size times the input");
    if (Status s = commAfterCompute(what); !s) return s;
    if (Status s = nccl_->allGather(in.data_ptr(), out.data_ptr(), static_cast<std::size_t>(in.numel()), *type,
                                    commStream_, what);
        !s)
      return s;
    if (!out.is_same(output)) output.copy_(out);
    return {};
  }

  Status gather(const at::Tensor& input, at::Tensor output, int root, std::string what) override {
    at::Tensor all = at::empty({input.numel() * worldSize()}, input.options().device(at::kCUDA, static_cast<c10::DeviceIndex>(device_)));
    if (Status s = allGather(input, all, what); !s) return s;
    if (rank() == root) output.copy_(all.view(output.sizes()));
    return {};
  }

  Status scatter(const at::Tensor& input, at::Tensor output, int root, std::string what) override {
    at::Tensor all = rank() == root ? onDevice(input).clone()
                                    : at::empty({output.numel() * worldSize()}, output.options().device(at::kCUDA, static_cast<c10::DeviceIndex>(device_)));
    if (Status s = broadcast(all, root, what); !s) return s;
    output.copy_(all.reshape({-1}).narrow(0, rank() * output.numel(), output.numel()).view(output.sizes()));
    return {};
  }

  Status broadcast(at::Tensor tensor, int root, std::string what) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    at::Tensor t = onDevice(tensor);
    Expected<NcclDType> type = check(t, what);
    if (!type) return type.error();
    if (Status s = commAfterCompute(what); !s) return s;
    if (Status s = nccl_->broadcast(t.data_ptr(), static_cast<std::size_t>(t.numel()), *type, root, commStream_, what);
        !s)
      return s;
    if (!t.is_same(tensor)) tensor.copy_(t);
    return {};
  }

  Status barrier(std::string what) override {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    if (Status s = commAfterCompute(what); !s) return s;
    return nccl_->barrier(commStream_, what);
  }

  // A communicator of its own (NCCL's unique id for the group under the group's name in the
  // run's store), on a communication stream of its own. Its errors name the rank in the group.
  Expected<std::unique_ptr<Communicator>> subgroup(const std::string& name, const std::vector<int>& members) override {
    if (std::string problem = subgroupProblem(members, rank(), worldSize()); !problem.empty())
      return argumentError(rank(), "the group " + name, problem);
    const int groupRank = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    return joinNccl(groupRank, static_cast<int>(members.size()), device_, store_, timeout(), "nccl/unique_id/" + name);
  }

  // A collective over worldSize() equal blocks of `buffer`, started on the communication stream.
  using BlockedStart = Expected<std::unique_ptr<NcclCommunicator::Pending>> (NcclCommunicator::*)(
      void*, std::size_t, NcclDType, cudaStream_t, std::string);
  Expected<std::unique_ptr<PendingCollective>> startBlocked(at::Tensor buffer, std::string what, BlockedStart start) {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    Expected<NcclDType> type = check(buffer, what);
    if (!type) return type.error();
    if (buffer.dim() == 0 || buffer.size(0) % worldSize() != 0)
      return argumentError(rank(), what, "the buffer's first dimension is not a multiple of the world size");
    const auto perRank = static_cast<std::size_t>(buffer.numel() / worldSize());
    if (Status s = commAfterCompute(what); !s) return s.error();
    Expected<std::unique_ptr<NcclCommunicator::Pending>> p =
        ((*nccl_).*start)(buffer.data_ptr(), perRank, *type, commStream_, what);
    if (!p) return p.error();
    return std::unique_ptr<PendingCollective>(std::make_unique<NcclPending>(std::move(*p), std::move(buffer)));
  }

 private:
  cudaStream_t stream() const { return at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream(); }

  // The communication stream waits (on the GPU, not the host) for everything the compute stream
  // has queued so far: the kernels that produced the bucket.
  Status commAfterCompute(const std::string& what) const {
    cudaEvent_t ready = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ready, stream());
    if (e == cudaSuccess) e = cudaStreamWaitEvent(commStream_, ready, 0);
    if (ready) (void)cudaEventDestroy(ready);  // released once the wait has been satisfied
    if (e != cudaSuccess)
      return argumentError(rank(), what, std::string("ordering the communication stream: ") + cudaGetErrorString(e));
    return {};
  }

  // A host tensor's contiguous copy on the device; a device tensor itself (made contiguous).
  at::Tensor onDevice(const at::Tensor& t) const {
    if (!t.defined()) return t;
    if (t.is_cuda() && t.is_contiguous()) return t;
    return t.to(at::TensorOptions().device(at::kCUDA, static_cast<c10::DeviceIndex>(device_))).contiguous();
  }

  Expected<NcclDType> check(const at::Tensor& t, const std::string& what) const {
    if (!t.defined()) return argumentError(rank(), what, "the buffer is undefined");
    if (!t.is_cuda()) return argumentError(rank(), what, "the buffer is not on the GPU");
    if (!t.is_contiguous()) return argumentError(rank(), what, "the buffer is not contiguous");
    std::optional<NcclDType> type = ncclTypeOf(t.scalar_type());
    if (!type) return argumentError(rank(), what, std::string("NCCL cannot sum ") + c10::toString(t.scalar_type()));
    return *type;
  }

  std::unique_ptr<NcclCommunicator> nccl_;
  std::shared_ptr<KeyValueStore> store_;  // shared with the subgroups made from this one
  int device_;
  cudaStream_t commStream_;  // the started collectives' (gradient buckets during the backward)
};

Expected<std::unique_ptr<Communicator>> joinNccl(int rank, int worldSize, int device,
                                                 std::shared_ptr<KeyValueStore> store,
                                                 std::chrono::milliseconds timeout, const std::string& key) {
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  Expected<std::unique_ptr<NcclCommunicator>> nccl =
      NcclCommunicator::create(rank, worldSize, device, *store, timeout, key);
  if (!nccl) return nccl.error();
  cudaStream_t commStream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking); e != cudaSuccess)
    return Error{"rank " + std::to_string(rank) + ": cannot create the communication stream: " +
                 cudaGetErrorString(e)};
  return std::unique_ptr<Communicator>(
      std::make_unique<NcclTensorCommunicator>(std::move(*nccl), std::move(store), device, commStream));
}

}  // namespace

Expected<std::unique_ptr<Communicator>> createNcclCommunicator(const DistEnv& env, int deviceIndex,
                                                               std::chrono::milliseconds timeout) {
  std::signal(SIGPIPE, SIG_IGN);
  Expected<std::unique_ptr<KeyValueStore>> store = TcpKeyValueStore::connect(env, timeout);
  if (!store) return store.error();
  return joinNccl(env.rank, env.worldSize, deviceIndex, std::shared_ptr<KeyValueStore>(std::move(*store)), timeout,
                  "nccl/unique_id");
}

}  // namespace gradc::runtime
