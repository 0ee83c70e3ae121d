// BLAS kernel selection: which OpenBLAS core is worth forcing for which CPU features, and, on
// this machine, whether OpenBLAS misdetected the CPU.
#include <cstdlib>

#include "runtime/kernels/blas_kernels.h"

#undef CHECK  // c10 brings glog's CHECK; doctest's must win
#include <doctest/doctest.h>

using namespace gradc::runtime;

TEST_CASE("the core worth forcing: only when OpenBLAS chose below what the CPU offers") {
  CpuFeatures avx512{.avx = true, .avx2 = true, .fma = true, .avx512f = true, .avx512bw = true, .avx512dq = true,
                     .avx512vl = true};
  CpuFeatures avx2{.avx = true, .avx2 = true, .fma = true};
  CpuFeatures avx{.avx = true};
  CpuFeatures sse{};
  CHECK(betterCoreType("Prescott", avx512) == std::optional<std::string>("SkylakeX"));
  CHECK(betterCoreType("Haswell", avx512) == std::optional<std::string>("SkylakeX"));
  CHECK(betterCoreType("Prescott", avx2) == std::optional<std::string>("Haswell"));
  CHECK(betterCoreType("NEHALEM", avx) == std::optional<std::string>("Sandybridge"));
  CHECK_FALSE(betterCoreType("Cooperlake", avx512).has_value());
  CHECK_FALSE(betterCoreType("SkylakeX", avx512).has_value());
  CHECK_FALSE(betterCoreType("Zen", avx2).has_value());
  CHECK_FALSE(betterCoreType("Haswell", avx2).has_value());
  CHECK_FALSE(betterCoreType("Prescott", sse).has_value());
  CHECK_FALSE(betterCoreType("SomethingNew", avx512).has_value());  // unknown: keep OpenBLAS's choice
  // AVX-512 without BW/DQ/VL (Knights Landing) is not SkylakeX's instruction set.
  CpuFeatures knl = avx2;
  knl.avx512f = true;
  CHECK(betterCoreType("Prescott", knl) == std::optional<std::string>("Haswell"));
}

TEST_CASE("this machine: OpenBLAS's core against CPUID") {
  std::optional<std::string> core = openblasCoreName();
  if (!core) {
    MESSAGE("skipped: the BLAS LibTorch calls is not OpenBLAS");
    return;
  }
  const CpuFeatures f = cpuFeatures();
  MESSAGE("OpenBLAS core " << *core << "; CPU: AVX " << f.avx << ", AVX2 " << f.avx2 << ", FMA " << f.fma
                           << ", AVX-512 F/BW/DQ/VL " << f.avx512f << f.avx512bw << f.avx512dq << f.avx512vl);
  std::optional<std::string> better = betterCoreType(*core, f);
  if (!better) {
    MESSAGE("skipped: OpenBLAS recognised this CPU (no better core to select)");
    return;
  }
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced && *forced) {
    // The user's choice of core: gradc keeps it, and says so.
    MESSAGE("OPENBLAS_CORETYPE=" << forced << " is set: gradc keeps it");
    CHECK(blasInfo().source == "OPENBLAS_CORETYPE set by the user");
    return;
  }
  // Misdetected: gradc (its main) would re-execute with OPENBLAS_CORETYPE; here the test
  // process ran as it is, so the info says OpenBLAS chose.
  MESSAGE("OpenBLAS misdetects this CPU: gradc selects " << *better);
  CHECK(blasInfo().source.find("OpenBLAS") != std::string::npos);
}
