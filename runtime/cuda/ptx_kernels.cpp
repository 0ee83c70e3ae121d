#include "runtime/cuda/ptx_kernels.h"

#include <cuda.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "ir/fused_body.h"
#include "runtime/device/device.h"
#include "ir/graph.h"

namespace gradc::runtime {
namespace {

// The driver functions gradc calls, from the runtime's driver.
struct Driver {
  CUresult (*moduleLoadDataEx)(CUmodule*, const void*, unsigned int, CUjit_option*, void**) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*moduleUnload)(CUmodule) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                           unsigned int, unsigned int, CUstream, void**, void**) = nullptr;
  CUresult (*getErrorString)(CUresult, const char**) = nullptr;
};

template <class Fn>
Status entryPoint(const char* symbol, Fn& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t e = cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || !address) {
    (void)cudaGetLastError();
    return Error{std::string("the CUDA driver has no ") + symbol +
                 (e != cudaSuccess ? std::string(" (") + cudaGetErrorString(e) + ")" : std::string())};
  }
  fn = reinterpret_cast<Fn>(address);
  return {};
}

Expected<const Driver*> driver() {
  static std::once_flag once;
  static Driver d;
  static Status status;
  std::call_once(once, [] {
    for (Status s : {entryPoint("cuModuleLoadDataEx", d.moduleLoadDataEx),
                     entryPoint("cuModuleGetFunction", d.moduleGetFunction),
                     entryPoint("cuModuleUnload", d.moduleUnload), entryPoint("cuLaunchKernel", d.launchKernel),
                     entryPoint("cuGetErrorString", d.getErrorString)})
      if (!s && status) status = s;
  });
  if (!status) return status.error();
  return &d;
}

std::string driverError(const Driver& d, CUresult r) {
  const char* text = nullptr;
  if (d.getErrorString(r, &text) != CUDA_SUCCESS || !text) return "CUDA driver error " + std::to_string(r);
  return text;
}

// The names of the kernels of a PTX text: the identifiers after `.entry`.
std::set<std::string, std::less<>> entryNames(std::string_view ptx) {
  std::set<std::string, std::less<>> names;
  constexpr std::string_view kEntry = ".entry";
  for (size_t at = ptx.find(kEntry); at != std::string_view::npos; at = ptx.find(kEntry, at + kEntry.size())) {
    size_t i = at + kEntry.size();
    if (i >= ptx.size() || !std::isspace(static_cast<unsigned char>(ptx[i]))) continue;
    while (i < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[i]))) ++i;
    size_t end = i;
    while (end < ptx.size() && (std::isalnum(static_cast<unsigned char>(ptx[end])) || ptx[end] == '_' ||
                                ptx[end] == '$' || ptx[end] == '.'))
      ++end;
    if (end > i) names.emplace(ptx.substr(i, end - i));
  }
  return names;
}

class PtxKernels final : public GeneratedKernels {
 public:
  PtxKernels(std::string ptx, std::set<std::string, std::less<>> names, std::filesystem::path shownAs)
      : GeneratedKernels(std::move(shownAs)), ptx_(std::move(ptx)), names_(std::move(names)) {}
  PtxKernels(const PtxKernels&) = delete;
  PtxKernels& operator=(const PtxKernels&) = delete;
  // Unloads the modules on their devices, once their launches are done; a process that never
  // compiled the PTX (a launcher, a CPU rank) touches no GPU here.
  ~PtxKernels() override {
    if (modules_.empty()) return;
    Expected<const Driver*> d = driver();
    if (!d) return;
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    for (const auto& [device, module] : modules_)
      if (cudaSetDevice(device) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess) (void)(*d)->moduleUnload(module);
    if (current >= 0) (void)cudaSetDevice(current);
    (void)cudaGetLastError();
  }

  bool has(std::string_view name) const override { return names_.find(name) != names_.end(); }
  // Every fused region; a one-pass update when the PTX has its kernel (PTX written before the
  // updates were generated for GPUs has none: the update then runs op by op).
  bool carries(const ir::Node& node) const override {
    return node.op().role == ir::OpRole::FusedRegion || has(ir::generatedKernelName(node));
  }

  Expected<void*> function(std::string_view name, const Device& on) const override {
    if (!has(name)) return Error{"the PTX " + path().string() + " has no kernel " + std::string(name)};
    const c10::Device where = on.options(ir::DType::f32).device();
    if (!where.is_cuda()) return Error{"the PTX " + path().string() + " runs on a CUDA device, not on " + on.name()};
    Expected<const Driver*> d = driver();
    if (!d) return Error{"cannot load the PTX " + path().string() + ": " + d.error().message};
    const int device = where.index();
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::pair{device, std::string(name)};
    if (auto it = functions_.find(key); it != functions_.end()) return reinterpret_cast<void*>(it->second);
    Expected<CUmodule> module = moduleOn(**d, device);
    if (!module) return module.error();
    CUfunction fn = nullptr;
    if (CUresult r = (*d)->moduleGetFunction(&fn, *module, std::string(name).c_str()); r != CUDA_SUCCESS)
      return Error{"the PTX " + path().string() + ": kernel " + std::string(name) + ": " + driverError(**d, r)};
    functions_.emplace(key, fn);
    return reinterpret_cast<void*>(fn);
  }

 private:
  // The module of the PTX on `device`, compiled by the driver on first use, in the device's
  // primary context (the one LibTorch's runtime calls use); the thread's current device is
  // restored after (mutex_ held).
  Expected<CUmodule> moduleOn(const Driver& d, int device) const {
    if (auto it = modules_.find(device); it != modules_.end()) return it->second;
    int current = 0;
    cudaError_t e = cudaGetDevice(&current);
    if (e == cudaSuccess) e = cudaSetDevice(device);
    if (e == cudaSuccess) e = cudaFree(nullptr);  // makes the primary context current
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return Error{"cannot load the PTX " + path().string() + " on cuda:" + std::to_string(device) + ": " +
                   cudaGetErrorString(e)};
    }
    struct Restore {
      int device;
      ~Restore() { (void)cudaSetDevice(device); }
    } restore{current};
    std::string log(8192, '\0');
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(log.size()))};
    CUmodule module = nullptr;
    if (CUresult r = d.moduleLoadDataEx(&module, ptx_.c_str(), 2, options, values); r != CUDA_SUCCESS) {
      log.resize(std::min(log.size(), log.find('\0')));
      return Error{"the CUDA driver cannot compile the PTX " + path().string() + " for cuda:" + std::to_string(device) +
                   ": " + driverError(d, r) + (log.empty() ? std::string() : " (" + log + ")")};
    }
    modules_.emplace(device, module);
    return module;
  }

  std::string ptx_;
  std::set<std::string, std::less<>> names_;
  mutable std::mutex mutex_;
  mutable std::map<int, CUmodule> modules_;
  mutable std::map<std::pair<int, std::string>, CUfunction> functions_;
};

}  // namespace

Expected<std::shared_ptr<const GeneratedKernels>> ptxKernelsFromText(std::string_view ptx,
                                                                     const std::filesystem::path& shownAs) {
  std::set<std::string, std::less<>> names = entryNames(ptx);
  if (names.empty()) return Error{"the PTX " + shownAs.string() + " holds no kernel"};
  return std::shared_ptr<const GeneratedKernels>(
      std::make_shared<PtxKernels>(std::string(ptx), std::move(names), shownAs));
}

Status launchPtxKernel(void* kernel, std::int64_t n, void** params, cudaStream_t stream) {
  if (n <= 0) return {};
  Expected<const Driver*> d = driver();
  if (!d) return d.error();
  // One thread per element up to 65,535 blocks of 256; the kernels' grid-stride loop covers the rest.
  constexpr std::int64_t kThreads = 256, kMaxBlocks = 65535;
  const auto blocks = static_cast<unsigned int>(std::min(kMaxBlocks, (n + kThreads - 1) / kThreads));
  if (CUresult r = (*d)->launchKernel(reinterpret_cast<CUfunction>(kernel), blocks, 1, 1, kThreads, 1, 1, 0,
                                      reinterpret_cast<CUstream>(stream), params, nullptr);
      r != CUDA_SUCCESS)
    return Error{"launching a generated kernel: " + driverError(**d, r)};
  return {};
}

}  // namespace gradc::runtime
