// A GPU's generated kernels: the artifact's PTX of its fused regions (codegen/kernels.h,
// emitPtx), one kernel per region with the ABI of codegen/kernel_builder.h,
//
//   NAME(operand pointers..., result pointers..., i64 n, i64 seed, i64 step,
//        i64 rng, i64 rng_offset per random step)
//
// a grid-stride loop over the n elements of the region's result, and one kernel per one-pass
// AdamW update (adamw_step {fused = true}: codegen/optimizer_kernels.h).
//
// - The kernel names are read from the PTX's `.entry` lines when it is loaded, so an artifact's
//   PTX is checked against its graph (GeneratedKernels::covers) before any GPU is touched.
// - The driver compiles the PTX for a GPU the first time one of its kernels is asked for on it
//   (function(name, device): the executor asks for its own device), once per device, in that
//   device's primary context, where LibTorch's kernels run too. A handle is valid on the device
//   it was asked for. A PTX the driver rejects is an Error carrying the driver's log, not an
//   abort.
// - The driver's entry points are taken through the CUDA runtime (cudaGetDriverEntryPoint), so
//   gradc links no libcuda of its own: it uses the one the runtime loaded.
// - A one-pass update whose kernel the PTX lacks (PTX written before the updates were generated
//   for GPUs) runs op by op, with ATen's kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "ir/status.h"
#include "runtime/kernels/generated_kernels.h"

namespace gradc::runtime {

// The kernels of `ptx` (its text, as read and checked from the artifact); an Error when it holds
// no kernel at all. `shownAs` names it in messages.
Expected<std::shared_ptr<const GeneratedKernels>> ptxKernelsFromText(std::string_view ptx,
                                                                     const std::filesystem::path& shownAs);

// Launches `kernel` (a function() of PTX kernels) over `n` elements on `stream`: `params` points
// at each argument in the kernel's order. An Error with the driver's reason when it fails.
Status launchPtxKernel(void* kernel, std::int64_t n, void** params, cudaStream_t stream);

}  // namespace gradc::runtime
