#include "runtime/kernels/blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace gradc::runtime {
namespace {

constexpr const char* kSelectedMarker = "GRADC_BLAS_SELECTED";  // set by the re-exec: the core OpenBLAS chose
constexpr const char* kKeepMarker = "GRADC_BLAS_KEEP";          // set after a failed check: keep OpenBLAS's choice

// Set and not empty (an empty OPENBLAS_CORETYPE is OpenBLAS's own choice).
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Vector level of an OpenBLAS x86-64 core: 0 SSE only, 1 AVX, 2 AVX2 + FMA, 3 AVX-512.
std::optional<int> coreLevelOf(std::string_view core) {
  static const std::pair<const char*, int> kLevels[] = {
      {"prescott", 0},    {"core2", 0},      {"penryn", 0},     {"dunnington", 0}, {"nehalem", 0},
      {"atom", 0},        {"opteron", 0},    {"barcelona", 0},  {"bobcat", 0},     {"sandybridge", 1},
      {"bulldozer", 1},   {"piledriver", 1}, {"haswell", 2},    {"zen", 2},        {"steamroller", 2},
      {"excavator", 2},   {"skylakex", 3},   {"cooperlake", 3}, {"sapphirerapids", 3}};
  const std::string name = lower(core);
  for (const auto& [n, level] : kLevels)
    if (name == n) return level;
  return std::nullopt;
}

int featureLevel(const CpuFeatures& f) {
  if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) return 3;
  if (f.avx2 && f.fma) return 2;
  return f.avx ? 1 : 0;
}

// A 48x40 @ 40x56 product against a double-precision loop.
bool gemmAgrees() {
  at::Tensor a = at::randn({48, 40}), b = at::randn({40, 56});
  at::Tensor c = at::mm(a, b).contiguous();
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  const float* pc = c.data_ptr<float>();
  for (int i = 0; i < 48; ++i)
    for (int j = 0; j < 56; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < 40; ++k) {
        ref += static_cast<double>(pa[i * 40 + k]) * pb[k * 56 + j];
        mag += std::abs(static_cast<double>(pa[i * 40 + k]) * pb[k * 56 + j]);
      }
      if (!(std::abs(pc[i * 56 + j] - ref) <= 1e-5 * mag + 1e-6)) return false;
    }
  return true;
}

void reexec(char** argv) {
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

}  // namespace

CpuFeatures cpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avxBit = c & (1u << 28), fmaBit = c & (1u << 12);
  unsigned xcr0 = 0;
  if (osxsave) {
    unsigned hi = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(hi) : "c"(0));
  }
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xE6) == 0xE6;
  f.avx = avxBit && ymm;
  f.fma = fmaBit && ymm;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b & (1u << 5)) && ymm;
    f.avx512f = (b & (1u << 16)) && zmm;
    f.avx512dq = (b & (1u << 17)) && zmm;
    f.avx512bw = (b & (1u << 30)) && zmm;
    f.avx512vl = (b & (1u << 31)) && zmm;
  }
#endif
  return f;
}

std::optional<std::string> openblasCoreName() {
  using CoreNameFn = char* (*)();
  auto fn = reinterpret_cast<CoreNameFn>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!fn) return std::nullopt;
  const char* name = fn();
  return name ? std::optional<std::string>(name) : std::nullopt;
}

std::optional<int> openblasCoreLevel(std::string_view core) { return coreLevelOf(core); }

std::optional<std::string> betterCoreType(std::string_view chosen, const CpuFeatures& features) {
  std::optional<int> have = coreLevelOf(chosen);
  const int want = featureLevel(features);
  if (!have || *have >= want || want == 0) return std::nullopt;
  return want == 3 ? "SkylakeX" : want == 2 ? "Haswell" : "Sandybridge";
}

BlasInfo blasInfo() {
  BlasInfo info;
  std::optional<std::string> core = openblasCoreName();
  info.library = core ? "OpenBLAS" : "unknown";
  info.core = core.value_or("");
  if (const char* selected = std::getenv(kSelectedMarker); selected && *selected)
    info.source = std::string("selected by gradc (OpenBLAS chose ") + selected + " on this CPU)";
  else if (envSet("OPENBLAS_CORETYPE"))
    info.source = "OPENBLAS_CORETYPE set by the user";
  else if (envSet(kKeepMarker))
    info.source = "chosen by OpenBLAS (gradc's choice failed its GEMM check)";
  else
    info.source = "chosen by OpenBLAS";
  return info;
}

void selectBlasKernels(char** argv) {
  if (const char* selected = std::getenv(kSelectedMarker); selected && *selected) {
    // The re-executed process: trust the forced core only if a GEMM agrees with a reference.
    if (gemmAgrees()) return;
    ::unsetenv("OPENBLAS_CORETYPE");
    ::unsetenv(kSelectedMarker);
    ::setenv(kKeepMarker, selected, 1);
    reexec(argv);
    return;
  }
  if (envSet("OPENBLAS_CORETYPE") || envSet(kKeepMarker)) return;  // the user's choice, or already checked
  std::optional<std::string> core = openblasCoreName();
  if (!core) return;
  std::optional<std::string> better = betterCoreType(*core, cpuFeatures());
  if (!better) return;
  ::setenv("OPENBLAS_CORETYPE", better->c_str(), 1);
  ::setenv(kSelectedMarker, core->c_str(), 1);
  reexec(argv);
  ::unsetenv("OPENBLAS_CORETYPE");  // the re-exec failed: run with OpenBLAS's choice
  ::unsetenv(kSelectedMarker);
}

}  // namespace gradc::runtime
