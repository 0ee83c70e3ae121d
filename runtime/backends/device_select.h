// Choosing a rank's device: `gradc train --device cpu|cuda|auto` (the backends of
// runtime/backends/backends.h, or auto).
//
// A named backend: its device LOCAL_RANK on this machine (rank r of a local launch, or a
// torchrun/Slurm worker, uses cuda:LOCAL_RANK), refused with a clear error when this gradc was
// built without it (a CPU-only LibTorch has no CUDA backend), when it sees no device, or when the
// local rank has no device of its own (NCCL cannot run two ranks on one GPU). auto: the first
// backend other than the host's that this build has and that has a device for every local rank,
// else the CPU.
#pragma once

#include <string>
#include <string_view>

#include "ir/status.h"
#include "runtime/backends/backends.h"
#include "runtime/device/device.h"

namespace gradc::runtime {

// A --device value: a backend, or automatic (nullptr).
struct DeviceChoice {
  const Backend* backend = nullptr;
  bool automatic() const { return backend == nullptr; }
};

// A backend's name or "auto"; anything else is an Error listing them.
Expected<DeviceChoice> parseDeviceChoice(std::string_view text);

// The backend `choice` puts local ranks [0, localRanks) on, without touching a device (a
// launcher decides for its workers this way); an Error when the named one cannot be had.
Expected<const Backend*> resolveBackend(DeviceChoice choice, int localRanks);

// The device of local rank `localRank` (0 outside a launch). The device lives as long as the
// process.
Expected<const Device*> selectDevice(DeviceChoice choice, int localRank);

}  // namespace gradc::runtime
