// The Communicator (runtime/comm/communicator.h) of GPU ranks: NCCL over ATen CUDA tensors, built only
// against a CUDA LibTorch.
//
// Bootstrap: the NCCL unique id goes from rank 0 to the others through the run's TCPStore
// rendezvous (TcpKeyValueStore), as Gloo's does.
//
// Streams: the started collectives (the gradient buckets' all-reduce or reduce-scatter, issued
// during the backward) run on a communication stream of their own, which first waits -- on the
// GPU, through an event -- for everything the compute stream (ATen's current stream, where every
// kernel of the step runs) has queued, i.e. the kernels that produced the bucket. The backward's
// later kernels then run beside the collective, as DDP overlaps them. wait() blocks the host
// until the collective is done, polling NCCL's asynchronous error and the timeout
// (runtime/comm/nccl_communicator.h: a stuck collective aborts the communicator and is an Error naming
// the rank, the collective and the step, as on Gloo); kernels queued after wait() returns see
// its result. A bucket is an arena buffer whose planned interval ends only after its wait, so
// nothing overwrites it while the communication stream reads it. The blocking collectives run
// on the same stream (one communicator's collectives in one order on every rank), the host
// waiting for each. A started collective must be waited for before the communicator goes.
//
// Buffers on the host (the trainer's checksums and data-file digests) are staged through the
// device and copied back. gather is an all_gather whose result only the root keeps; scatter is a
// broadcast of the root's buffer from which each rank keeps its rows (NCCL has neither
// collective; both run once per run, outside the step).
#pragma once

#include <chrono>
#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/comm/dist_env.h"

namespace gradc::runtime {

// Joins the NCCL communicator of every rank of `env` on CUDA GPU `deviceIndex`.
Expected<std::unique_ptr<Communicator>> createNcclCommunicator(const DistEnv& env, int deviceIndex,
                                                               std::chrono::milliseconds timeout);

}  // namespace gradc::runtime
