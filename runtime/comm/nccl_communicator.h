// NCCL collectives for GPU ranks, over raw device buffers (no LibTorch: the LibTorch gradc
// builds against is CPU-only). Built as its own library, gradc_nccl, when nccl.h and libnccl
// are found (runtime/CMakeLists.txt); it needs nccl.h, cuda_runtime.h and runtime/comm/kv_store.h.
//
// The NCCL unique id is created by rank 0 and handed to the other ranks through a
// KeyValueStore (TcpKeyValueStore over the run's TCPStore, in gradc_runtime).
//
// Timeouts: the communicator is non-blocking (ncclConfig_t::blocking = 0). Initialisation and
// every wait() poll ncclCommGetAsyncError and the completion event; past the timeout, or on an
// asynchronous error, the communicator is aborted (ncclCommAbort) and the call returns an
// Error worded as in runtime/comm/communicator.h; every later call on an aborted communicator
// fails at once.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "ir/status.h"
#include "runtime/comm/kv_store.h"

namespace gradc::runtime {

enum class NcclDType { Float32, Float64, Float16, BFloat16, Int32, Int64, UInt8 };

class NcclCommunicator {
 public:
  // The NCCL library version as major * 10000 + minor * 100 + patch (e.g. 22805).
  static int libraryVersion();

  // Joins the communicator of `worldSize` ranks on CUDA device `device` of this process. Rank 0
  // publishes the unique id under `key` in `store`; the others read it from there.
  static Expected<std::unique_ptr<NcclCommunicator>> create(int rank, int worldSize, int device, KeyValueStore& store,
                                                            std::chrono::milliseconds timeout,
                                                            const std::string& key = "nccl/unique_id");
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return worldSize_; }
  int device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // A collective enqueued on a stream. wait() blocks the calling thread until it is done on
  // the device (or failed, or timed out); call it once. Destroying it unwaited waits.
  class Pending {
   public:
    ~Pending();
    Status wait();

   private:
    friend class NcclCommunicator;
    Pending(NcclCommunicator* comm, cudaEvent_t event, std::string what, std::chrono::steady_clock::time_point start)
        : comm_(comm), event_(event), what_(std::move(what)), start_(start) {}
    NcclCommunicator* comm_;
    cudaEvent_t event_;
    std::string what_;
    std::chrono::steady_clock::time_point start_;
    bool waited_ = false;
  };

  // In-place sum of `count` elements at `devicePtr` over all ranks, enqueued on `stream`.
  Expected<std::unique_ptr<Pending>> startAllReduceSum(void* devicePtr, std::size_t count, NcclDType dtype,
                                                       cudaStream_t stream, std::string what);
  // Sum over all ranks of a buffer of worldSize blocks of countPerRank elements, of which this
  // rank keeps its own block, in place (block `rank` of `devicePtr`; the others are left
  // unspecified), enqueued on `stream`: ZeRO stage 2's gradient reduction.
  Expected<std::unique_ptr<Pending>> startReduceScatterSum(void* devicePtr, std::size_t countPerRank, NcclDType dtype,
                                                           cudaStream_t stream, std::string what);
  // Every rank's block of a buffer of worldSize blocks of countPerRank elements gathered in
  // place (block `rank` holds this rank's), enqueued on `stream`: ZeRO stage 3's parameters.
  Expected<std::unique_ptr<Pending>> startAllGather(void* devicePtr, std::size_t countPerRank, NcclDType dtype,
                                                    cudaStream_t stream, std::string what);
  // Blocking: enqueue, then wait.
  Status allReduceSum(void* devicePtr, std::size_t count, NcclDType dtype, cudaStream_t stream, std::string what);
  Status broadcast(void* devicePtr, std::size_t count, NcclDType dtype, int root, cudaStream_t stream, std::string what);
  // recv holds worldSize * countPerRank elements, rank-major.
  Status allGather(const void* send, void* recv, std::size_t countPerRank, NcclDType dtype, cudaStream_t stream,
                   std::string what);
  // An all-reduce of one int on a scratch buffer.
  Status barrier(cudaStream_t stream, std::string what);

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int worldSize, int device, std::chrono::milliseconds timeout)
      : comm_(comm), rank_(rank), worldSize_(worldSize), device_(device), timeout_(timeout) {}

  // Finishes an NCCL call on a non-blocking communicator (ncclInProgress -> wait for it).
  Status checkCall(ncclResult_t result, const std::string& what, std::chrono::steady_clock::time_point start);
  // Polls `event` and the communicator's async error until done, failure or timeout.
  Status waitEvent(cudaEvent_t event, const std::string& what, std::chrono::steady_clock::time_point start);
  Error failure(const std::string& what, std::chrono::steady_clock::time_point start, const std::string& cause);
  Error abortWith(const std::string& what, std::chrono::steady_clock::time_point start, const std::string& cause);
  Status usable(const std::string& what) const;
  Expected<std::unique_ptr<Pending>> enqueued(ncclResult_t result, cudaStream_t stream, std::string what,
                                              std::chrono::steady_clock::time_point start);

  ncclComm_t comm_;
  int rank_;
  int worldSize_;
  int device_;
  std::chrono::milliseconds timeout_;
  bool aborted_ = false;
  void* scratch_ = nullptr;  // one int for barrier()
};

}  // namespace gradc::runtime
