// The Communicator (runtime/communicator.h) of GPU ranks: NCCL over ATen CUDA tensors, built only
// against a CUDA LibTorch.
//
// Bootstrap: the NCCL unique id goes from rank 0 to the others through the run's TCPStore
// rendezvous (TcpKeyValueStore), as Gloo's does. Collectives are enqueued on the device's
// current ATen stream -- the stream every kernel of the step runs on -- so a collective starts
// after the kernels that produced its buffer and the kernels after it see its result, without
// host synchronisation; wait() blocks the host until the collective is done, polling NCCL's
// asynchronous error and the timeout (runtime/nccl_communicator.h: a stuck collective aborts the
// communicator and is an Error naming the rank, the collective and the step, as on Gloo).
//
// Buffers on the host (the trainer's checksums and data-file digests) are staged through the
// device and copied back. gather is an all_gather whose result only the root keeps; scatter is a
// broadcast of the root's buffer from which each rank keeps its rows (NCCL has neither
// collective; both run once per run, outside the step).
#pragma once

#include <chrono>
#include <memory>

#include "runtime/communicator.h"
#include "runtime/dist_env.h"

namespace gradc::runtime {

// Joins the NCCL communicator of every rank of `env` on CUDA GPU `deviceIndex`.
Expected<std::unique_ptr<Communicator>> createNcclCommunicator(const DistEnv& env, int deviceIndex,
                                                               std::chrono::milliseconds timeout);

}  // namespace gradc::runtime
