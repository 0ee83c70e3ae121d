// The backends: each kind of device a rank can run on is one row of a table (backends()). What
// the command line, the launcher and the artifact loader need of a kind of device is in its row,
// so none of them names a device of its own:
//
//   - its name, the --device value ("cpu", "cuda", "reference"), and whether this build can run it (a GPU
//     backend needs a CUDA LibTorch): a row this build lacks says why;
//   - how many such devices the process sees, and the device of a local rank;
//   - the communicator its ranks join (Gloo on the host, NCCL on GPUs);
//   - its compile-time description (ir/kernel_target.h: workspace rules, what its communicator
//     sums, the format of the generated kernels it runs) and their loader
//     (runtime/kernels/generated_kernels.h);
//   - where a rank's arena is checked before anything is allocated: the host's available memory
//     (every local rank's arena together) or the device's free memory (each rank its own).
//
// Adding a device is one folder (runtime/<name>/: its description, its Device, its kernels, its
// communicator, its kernel loader, a backend.cmake) and one row in runtime/backends/backends.def;
// docs/development.md lists the files.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ir/kernel_target.h"
#include "ir/status.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/dist_env.h"
#include "runtime/device/device.h"
#include "runtime/kernels/generated_kernels.h"

namespace gradc::runtime {

enum class MemoryCheck {
  host,    // the arenas of the ranks this process starts, against the host's available memory
  device,  // each rank's arena against its device's free memory (Device::freeBytes)
};

struct Backend {
  const ir::KernelTarget* target = nullptr;  // its compile-time description
  std::string_view name;  // the --device value: target->name()
  // Empty when this build runs the backend; else why it cannot, and what to build instead.
  std::string_view missing;
  // The host: kernels read its tensors through raw pointers; it is always there.
  bool host = false;
  // How many devices of this kind the process sees; an Error with the reason when it cannot tell.
  Expected<int> (*visibleDevices)() = nullptr;
  // The device of local rank `localRank` (one per local rank, living as long as the process).
  Expected<const Device*> (*device)(int localRank) = nullptr;
  // The communicator of a rank of `env` running on this kind of device.
  Expected<std::unique_ptr<Communicator>> (*communicator)(const DistEnv& env, int localRank,
                                                          std::chrono::milliseconds timeout) = nullptr;
  // How the generated kernels it runs (of its target's format) are loaded from their (checked)
  // bytes; null for a backend that runs none.
  Expected<std::shared_ptr<const GeneratedKernels>> (*loadKernels)(std::string_view bytes,
                                                                   const std::filesystem::path& shownAs) = nullptr;
  MemoryCheck memoryCheck = MemoryCheck::host;

  bool built() const { return missing.empty(); }
  // Which of the artifact's kernel files it runs (ir::KernelFormat::none: it runs the reference step).
  GeneratedKernelFormat kernelFormat() const { return target->kernelFormat(); }
};

// Every backend gradc knows, the host's first; those this build lacks are rows with `missing`.
std::span<const Backend> backends();
// The backend of that name, nullptr when gradc knows none.
const Backend* findBackend(std::string_view name);
// The host's (the CPU).
const Backend& hostBackend();
// The known names, "cpu, cuda, reference", for messages.
std::string backendNames();

}  // namespace gradc::runtime
