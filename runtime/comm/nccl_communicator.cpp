#include "runtime/comm/nccl_communicator.h"

#include <cstring>
#include <thread>
#include <vector>

#include "runtime/comm/comm_error.h"

namespace gradc::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

ncclDataType_t toNccl(NcclDType dtype) {
  switch (dtype) {
    case NcclDType::Float32: return ncclFloat32;
    case NcclDType::Float64: return ncclFloat64;
    case NcclDType::Float16: return ncclFloat16;
    case NcclDType::BFloat16: return ncclBfloat16;
    case NcclDType::Int32: return ncclInt32;
    case NcclDType::Int64: return ncclInt64;
    case NcclDType::UInt8: return ncclUint8;
  }
  return ncclFloat32;
}

std::string cudaText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

// An NCCL result in words, with the library's last error message when it has one.
std::string ncclText(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" (") + last + ")";
  return text;
}

// The cause of an asynchronous NCCL failure, in the plain words of runtime/comm/comm_error.h where
// it is a closed connection.
std::string ncclCause(ncclResult_t result, ncclComm_t comm, std::chrono::milliseconds timeout) {
  std::string text = ncclText(result, comm);
  if (result == ncclRemoteError) return std::string(comm::kPeerClosedCause) + ": " + text;
  std::string plain = comm::causeFromMessage(text, timeout);
  return plain == comm::kPeerClosedCause ? plain + ": " + text : text;
}

constexpr auto kPollInterval = std::chrono::microseconds(200);

}  // namespace

int NcclCommunicator::libraryVersion() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 0;
  return version;
}

Expected<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create(int rank, int worldSize, int device,
                                                                      KeyValueStore& store,
                                                                      std::chrono::milliseconds timeout,
                                                                      const std::string& key) {
  const auto start = Clock::now();
  const std::string what = "creating the NCCL communicator (" + std::to_string(worldSize) + " ranks, device " +
                           std::to_string(device) + ")";
  auto fail = [&](const std::string& cause) { return comm::collectiveError(rank, what, secondsSince(start), cause); };
  if (worldSize < 1 || rank < 0 || rank >= worldSize) {
    return fail("rank " + std::to_string(rank) + " is not in a world of " + std::to_string(worldSize));
  }

  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();  // reset CUDA's last-error state for whoever calls CUDA next
    return fail("no CUDA device is visible to this process" +
                (err != cudaSuccess ? " (cudaGetDeviceCount: " + cudaText(err) + ")" : std::string()));
  }
  if (device < 0 || device >= devices) {
    return fail("device " + std::to_string(device) + " does not exist (" + std::to_string(devices) +
                " visible; check CUDA_VISIBLE_DEVICES and LOCAL_RANK)");
  }
  if ((err = cudaSetDevice(device)) != cudaSuccess) return fail("cudaSetDevice: " + cudaText(err));

  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return fail("ncclGetUniqueId: " + ncclText(r, nullptr));
    std::vector<std::uint8_t> bytes(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
    if (Status s = store.set(key, bytes); !s) return fail(s.message());
  } else {
    auto bytes = store.get(key);
    if (!bytes) return fail(bytes.error().message);
    if (bytes->size() != sizeof id) {
      return fail("the unique id under '" + key + "' has " + std::to_string(bytes->size()) + " bytes, not " +
                  std::to_string(sizeof id));
    }
    std::memcpy(&id, bytes->data(), sizeof id);
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, worldSize, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string cause = "ncclCommInitRankConfig: " + ncclText(r, comm);
    if (comm) ncclCommAbort(comm);
    return fail(cause);
  }
  // Wait for the initialisation to finish, at most the timeout.
  const auto deadline = start + timeout;
  while (true) {
    ncclResult_t state = ncclInProgress;
    r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) {
      std::string cause = ncclCause(state, comm, timeout);
      ncclCommAbort(comm);
      return fail(cause);
    }
    if (Clock::now() >= deadline) {
      ncclCommAbort(comm);
      return fail("not every rank joined within the " + comm::formatSeconds(timeout.count() / 1000.0) +
                  " s timeout (are all " + std::to_string(worldSize) + " ranks started?)");
    }
    std::this_thread::sleep_for(kPollInterval);
  }

  std::unique_ptr<NcclCommunicator> result(new NcclCommunicator(comm, rank, worldSize, device, timeout));
  if ((err = cudaMalloc(&result->scratch_, sizeof(int))) != cudaSuccess) {
    result->scratch_ = nullptr;
    return fail("cudaMalloc of the barrier scratch buffer: " + cudaText(err));
  }
  return result;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) {
    if (aborted_) {
      // Already torn down by ncclCommAbort.
    } else {
      // A clean shutdown: finalize (flushes outstanding work), then destroy. On a
      // non-blocking communicator finalize may return ncclInProgress: poll, bounded.
      const auto start = Clock::now();
      ncclResult_t r = ncclCommFinalize(comm_);
      ncclResult_t state = r;
      while (r == ncclSuccess || r == ncclInProgress) {
        if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || state != ncclInProgress) break;
        if (Clock::now() - start > timeout_) break;
        std::this_thread::sleep_for(kPollInterval);
      }
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
  }
  if (scratch_) cudaFree(scratch_);
}

Error NcclCommunicator::failure(const std::string& what, Clock::time_point start, const std::string& cause) {
  return comm::collectiveError(rank_, what, secondsSince(start), cause);
}

Error NcclCommunicator::abortWith(const std::string& what, Clock::time_point start, const std::string& cause) {
  if (!aborted_) {
    ncclCommAbort(comm_);
    aborted_ = true;
  }
  return failure(what, start, cause);
}

Status NcclCommunicator::usable(const std::string& what) const {
  if (!aborted_) return Status::success();
  return Error{"rank " + std::to_string(rank_) + ": " + what +
               ": the NCCL communicator was aborted after an earlier failure"};
}

Status NcclCommunicator::checkCall(ncclResult_t result, const std::string& what, Clock::time_point start) {
  if (result == ncclSuccess) return Status::success();
  if (result != ncclInProgress) return abortWith(what, start, ncclCause(result, comm_, timeout_));
  while (true) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess) return Status::success();
    if (state != ncclInProgress) return abortWith(what, start, ncclCause(state, comm_, timeout_));
    if (Clock::now() - start >= timeout_) return abortWith(what, start, comm::timeoutCause(timeout_));
    std::this_thread::sleep_for(kPollInterval);
  }
}

Status NcclCommunicator::waitEvent(cudaEvent_t event, const std::string& what, Clock::time_point start) {
  if (Status s = usable(what); !s) return s;
  while (true) {
    cudaError_t err = cudaEventQuery(event);
    if (err == cudaSuccess) return Status::success();
    if (err != cudaErrorNotReady) return abortWith(what, start, "CUDA error: " + cudaText(err));
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state != ncclSuccess && state != ncclInProgress) return abortWith(what, start, ncclCause(state, comm_, timeout_));
    if (Clock::now() - start >= timeout_) return abortWith(what, start, comm::timeoutCause(timeout_));
    std::this_thread::sleep_for(kPollInterval);
  }
}

Expected<std::unique_ptr<NcclCommunicator::Pending>> NcclCommunicator::enqueued(ncclResult_t result, cudaStream_t stream,
                                                                                 std::string what,
                                                                                 Clock::time_point start) {
  if (Status s = checkCall(result, what, start); !s) return s.error();
  cudaEvent_t event = nullptr;
  cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaEventRecord(event, stream);
  if (err != cudaSuccess) {
    if (event) cudaEventDestroy(event);
    return failure(what, start, "recording a CUDA event: " + cudaText(err));
  }
  return std::unique_ptr<Pending>(new Pending(this, event, std::move(what), start));
}

NcclCommunicator::Pending::~Pending() {
  if (!waited_) (void)wait();
  if (event_) cudaEventDestroy(event_);
}

Status NcclCommunicator::Pending::wait() {
  if (waited_) return Error{"rank " + std::to_string(comm_->rank_) + ": " + what_ + ": wait() called twice"};
  waited_ = true;
  return comm_->waitEvent(event_, what_, start_);
}

Expected<std::unique_ptr<NcclCommunicator::Pending>> NcclCommunicator::startAllReduceSum(void* devicePtr,
                                                                                         std::size_t count,
                                                                                         NcclDType dtype,
                                                                                         cudaStream_t stream,
                                                                                         std::string what) {
  if (Status s = usable(what); !s) return s.error();
  const auto start = Clock::now();
  ncclResult_t r = ncclAllReduce(devicePtr, devicePtr, count, toNccl(dtype), ncclSum, comm_, stream);
  return enqueued(r, stream, std::move(what), start);
}

namespace {
std::size_t elementBytesOf(NcclDType dtype) {
  switch (dtype) {
    case NcclDType::Float64:
    case NcclDType::Int64: return 8;
    case NcclDType::Float32:
    case NcclDType::Int32: return 4;
    case NcclDType::Float16:
    case NcclDType::BFloat16: return 2;
    case NcclDType::UInt8: return 1;
  }
  return 1;
}
}  // namespace

Expected<std::unique_ptr<NcclCommunicator::Pending>> NcclCommunicator::startReduceScatterSum(
    void* devicePtr, std::size_t countPerRank, NcclDType dtype, cudaStream_t stream, std::string what) {
  if (Status s = usable(what); !s) return s.error();
  const auto start = Clock::now();
  // In place: NCCL's reduce-scatter may receive into the sender's own block.
  void* own = static_cast<char*>(devicePtr) + static_cast<std::size_t>(rank_) * countPerRank * elementBytesOf(dtype);
  ncclResult_t r = ncclReduceScatter(devicePtr, own, countPerRank, toNccl(dtype), ncclSum, comm_, stream);
  return enqueued(r, stream, std::move(what), start);
}

Expected<std::unique_ptr<NcclCommunicator::Pending>> NcclCommunicator::startAllGather(
    void* devicePtr, std::size_t countPerRank, NcclDType dtype, cudaStream_t stream, std::string what) {
  if (Status s = usable(what); !s) return s.error();
  const auto start = Clock::now();
  // In place: NCCL's all-gather may send from the receiver's own block.
  const void* own = static_cast<const char*>(devicePtr) + static_cast<std::size_t>(rank_) * countPerRank * elementBytesOf(dtype);
  ncclResult_t r = ncclAllGather(own, devicePtr, countPerRank, toNccl(dtype), comm_, stream);
  return enqueued(r, stream, std::move(what), start);
}

Status NcclCommunicator::allReduceSum(void* devicePtr, std::size_t count, NcclDType dtype, cudaStream_t stream,
                                      std::string what) {
  auto pending = startAllReduceSum(devicePtr, count, dtype, stream, std::move(what));
  if (!pending) return pending.error();
  return (*pending)->wait();
}

Status NcclCommunicator::broadcast(void* devicePtr, std::size_t count, NcclDType dtype, int root, cudaStream_t stream,
                                   std::string what) {
  if (Status s = usable(what); !s) return s;
  const auto start = Clock::now();
  if (root < 0 || root >= worldSize_) return failure(what, start, "root " + std::to_string(root) + " is not a rank");
  ncclResult_t r = ncclBroadcast(devicePtr, devicePtr, count, toNccl(dtype), root, comm_, stream);
  auto pending = enqueued(r, stream, std::move(what), start);
  if (!pending) return pending.error();
  return (*pending)->wait();
}

Status NcclCommunicator::allGather(const void* send, void* recv, std::size_t countPerRank, NcclDType dtype,
                                   cudaStream_t stream, std::string what) {
  if (Status s = usable(what); !s) return s;
  const auto start = Clock::now();
  ncclResult_t r = ncclAllGather(send, recv, countPerRank, toNccl(dtype), comm_, stream);
  auto pending = enqueued(r, stream, std::move(what), start);
  if (!pending) return pending.error();
  return (*pending)->wait();
}

Status NcclCommunicator::barrier(cudaStream_t stream, std::string what) {
  return allReduceSum(scratch_, 1, NcclDType::Int32, stream, std::move(what));
}

}  // namespace gradc::runtime
