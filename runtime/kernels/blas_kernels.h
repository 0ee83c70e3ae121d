// Which BLAS kernels the process runs: LibTorch calls the system BLAS, and OpenBLAS picks its
// kernels from the CPU model at load time. On virtual CPUs it can fail to recognise the model
// and fall back to its oldest x86-64 kernels (`Core: Prescott`), about 4x slower GEMMs on an
// AVX-512 machine, for gradc and PyTorch alike.
//
// selectBlasKernels (first thing in main): when the user has not set OPENBLAS_CORETYPE, it
// compares the core OpenBLAS chose (openblas_get_corename, looked up at run time, so another
// BLAS still works) with what CPUID and the OS offer (AVX-512 F/BW/DQ/VL, AVX2 + FMA, AVX);
// when OpenBLAS chose below that, the process re-executes itself once with OPENBLAS_CORETYPE
// set to the best matching core (workers it starts later inherit it). After that re-exec a
// small GEMM is checked against a plain reference; on any doubt the process re-executes again
// with OpenBLAS's own choice. A user's OPENBLAS_CORETYPE is never changed. blasInfo() says
// what runs and why (printed by `gradc train`, recorded in the metrics JSON).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gradc::runtime {

struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
};

// CPUID, with the OS's support of the vector registers (XGETBV); all false off x86-64.
CpuFeatures cpuFeatures();

// The OpenBLAS core in use ("Cooperlake", "Prescott"); nullopt when the BLAS is not OpenBLAS.
std::optional<std::string> openblasCoreName();

// The vector level of an OpenBLAS core: 0 (SSE), 1 (AVX), 2 (AVX2 + FMA), kOpenblasAvx512Level
// (SkylakeX, Cooperlake, SapphireRapids); nullopt for a core this table does not know.
inline constexpr int kOpenblasAvx512Level = 3;
std::optional<int> openblasCoreLevel(std::string_view core);

// The core type worth forcing when OpenBLAS chose `chosen` on a CPU with `features`:
// "SkylakeX" (AVX-512 F/BW/DQ/VL), "Haswell" (AVX2 + FMA) or "Sandybridge" (AVX); nullopt when
// `chosen` is already at that level or above, or is a core this table does not know.
std::optional<std::string> betterCoreType(std::string_view chosen, const CpuFeatures& features);

struct BlasInfo {
  std::string library;  // "OpenBLAS", or "unknown" for another BLAS
  std::string core;     // the OpenBLAS core, "" when unknown
  std::string source;   // "chosen by OpenBLAS", "OPENBLAS_CORETYPE set by the user", "selected by gradc (...)"
};
BlasInfo blasInfo();

// See the header comment. argv: the process's own arguments (for the re-exec). Returns only
// when no re-exec is needed (or one failed: the process then runs as it is).
void selectBlasKernels(char** argv);

}  // namespace gradc::runtime
