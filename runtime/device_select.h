// Choosing a rank's device: `gradc train --device cpu|cuda|auto`.
//
// cpu: the host. cuda: GPU LOCAL_RANK of this machine (rank r of a local launch, or a
// torchrun/Slurm worker, uses cuda:LOCAL_RANK), refused with a clear error when this gradc was
// built against a CPU-only LibTorch, when no GPU is visible, or when the local rank has no GPU
// of its own (NCCL cannot run two ranks on one GPU). auto: cuda:LOCAL_RANK when this build
// supports CUDA and that GPU is visible, else the CPU.
#pragma once

#include <string>
#include <string_view>

#include "ir/status.h"
#include "runtime/device.h"

namespace gradc::runtime {

enum class DeviceChoice { cpu, cuda, automatic };

// "cpu", "cuda", "auto"; anything else is an Error listing them.
Expected<DeviceChoice> parseDeviceChoice(std::string_view text);

// Whether `choice` puts local ranks [0, localRanks) on GPUs, without touching a GPU (a launcher
// decides for its workers this way); an Error when cuda is asked for and cannot be had.
Expected<bool> resolvesToCuda(DeviceChoice choice, int localRanks);

// The device of local rank `localRank` (0 outside a launch). The device lives as long as the
// process.
Expected<const Device*> selectDevice(DeviceChoice choice, int localRank);

}  // namespace gradc::runtime
