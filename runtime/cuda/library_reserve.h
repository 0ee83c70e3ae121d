// Device memory that the CUDA libraries hold beside a memory plan for the whole run, as gradc's
// CUDA device configures them (runtime/cuda/cuda_device.cpp): cuBLAS's workspace, fixed by
// CUBLAS_WORKSPACE_CONFIG=:4096:8 (8 x 4 MiB), cuBLASLt's, fixed by CUBLASLT_WORKSPACE_SIZE=1024
// (KiB), and ATen's few bytes of CUDA state, with room to spare (the H200 with LibTorch 2.11
// measured 33.0 MiB). Plans for CUDA keep this much of a budget free (gradc compile
// --device-reserve cuda; gradc train --device cuda does it itself); the run measures what the
// libraries actually hold and says so when it is more.
#pragma once

#include <cstdint>

namespace gradc::runtime::cuda {

inline constexpr std::int64_t kLibraryReserveBytes = std::int64_t{36} << 20;

}  // namespace gradc::runtime::cuda
