#include "codegen/kernels.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Transforms/IPO/Internalize.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>
#if LLVM_VERSION_MAJOR >= 18  // VFABI::setVectorVariantNames moved out of ModuleUtils.h
#include <llvm/IR/VFABIDemangler.h>
#endif

#include "codegen/kernel_builder.h"
#include "codegen/optimizer_kernels.h"
#include "ir/fused_body.h"

extern char** environ;

namespace gradc::codegen {
namespace {

void initialiseTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

// The C library's functions (libm), with vector versions in the GNU vector-function ABI declared
// as their variants, so LLVM's loop vectoriser calls 4, 8 or 16 lanes at once (SSE, AVX2,
// AVX-512 as the host has them) instead of one scalar call per element. The vector versions come
// from SLEEF's GNU-ABI library (libsleefgnuabi, Debian's libsleef3, which LibTorch itself links):
// its plain names are the 1-ulp functions ATen's own vectorised exp and tanh call (Sleef_*_u10),
// so fused and unfused agree closely; glibc's libmvec has the same names but documents 4 ulp,
// which chains of transcendentals amplify (exp(exp(exp(x))) was off by 7e-6 relative).
// A math function of one argument, declared pure (no memory, no unwinding), so LLVM may hoist,
// vectorise or drop calls like arithmetic.
llvm::FunctionCallee declarePure(llvm::Module& module, const std::string& name, llvm::Type* t) {
  llvm::FunctionCallee f = module.getOrInsertFunction(name, t, t);
  if (auto* fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
    fn->setDoesNotThrow();
    fn->setDoesNotAccessMemory();
    fn->setWillReturn();
  }
  return f;
}

class CpuMath final : public MathLibrary {
 public:
  CpuMath(llvm::Module& m, bool avx2, bool avx512) : module_(m), avx2_(avx2), avx512_(avx512) {}
  llvm::Value* exp(llvm::IRBuilder<>& b, llvm::Value* x) override { return call(b, x, "expf", "exp"); }
  llvm::Value* tanh(llvm::IRBuilder<>& b, llvm::Value* x) override { return call(b, x, "tanhf", "tanh"); }
  llvm::Value* erf(llvm::IRBuilder<>& b, llvm::Value* x) override { return call(b, x, "erff", "erf"); }

 private:
  llvm::Value* call(llvm::IRBuilder<>& b, llvm::Value* x, const char* f32, const char* f64) {
    llvm::Type* t = x->getType();
    const std::string scalar = t->isFloatTy() ? f32 : f64;
    llvm::CallInst* c = b.CreateCall(declarePure(module_, scalar, t), {x});
    // libmvec's ISA letters and lanes: b = SSE4 (128 bits), d = AVX2 (256), e = AVX-512 (512).
    const unsigned lanes128 = t->isFloatTy() ? 4 : 2;
    std::vector<std::pair<char, unsigned>> isas{{'b', lanes128}};
    if (avx2_) isas.push_back({'d', 2 * lanes128});
    if (avx512_) isas.push_back({'e', 4 * lanes128});
    std::vector<std::string> variants;
    for (auto [isa, lanes] : isas) {
      const std::string name = "_ZGV" + std::string(1, isa) + "N" + std::to_string(lanes) + "v_" + scalar;
      llvm::FunctionCallee v = declarePure(module_, name, llvm::FixedVectorType::get(t, lanes));
      if (declared_.insert(name).second)  // kept until the vectoriser has had its chance to call it
        if (auto* vf = llvm::dyn_cast<llvm::Function>(v.getCallee())) llvm::appendToCompilerUsed(module_, {vf});
      variants.push_back("_ZGV_LLVM_N" + std::to_string(lanes) + "v_" + scalar + "(" + name + ")");
    }
    llvm::VFABI::setVectorVariantNames(c, variants);
    return c;
  }
  llvm::Module& module_;
  bool avx2_, avx512_;
  std::set<std::string> declared_;
};

// CUDA's libdevice (__nv_expf, ...), linked into the module before optimisation.
class LibdeviceMath final : public MathLibrary {
 public:
  explicit LibdeviceMath(llvm::Module& m) : module_(m) {}
  llvm::Value* exp(llvm::IRBuilder<>& b, llvm::Value* x) override { return call(b, x, "__nv_expf", "__nv_exp"); }
  llvm::Value* tanh(llvm::IRBuilder<>& b, llvm::Value* x) override { return call(b, x, "__nv_tanhf", "__nv_tanh"); }
  llvm::Value* erf(llvm::IRBuilder<>& b, llvm::Value* x) override { return call(b, x, "__nv_erff", "__nv_erf"); }

 private:
  llvm::Value* call(llvm::IRBuilder<>& b, llvm::Value* x, const char* f32, const char* f64) {
    llvm::Type* t = x->getType();
    return b.CreateCall(declarePure(module_, t->isFloatTy() ? f32 : f64, t), {x});
  }
  llvm::Module& module_;
};

// LLVM 18 made the code generator's level and file type scoped enumerations.
#if LLVM_VERSION_MAJOR >= 18
constexpr llvm::CodeGenOptLevel kAggressive = llvm::CodeGenOptLevel::Aggressive;
constexpr llvm::CodeGenFileType kAssemblyFile = llvm::CodeGenFileType::AssemblyFile;
constexpr llvm::CodeGenFileType kObjectFile = llvm::CodeGenFileType::ObjectFile;
#else
constexpr llvm::CodeGenOpt::Level kAggressive = llvm::CodeGenOpt::Aggressive;
constexpr llvm::CodeGenFileType kAssemblyFile = llvm::CGFT_AssemblyFile;
constexpr llvm::CodeGenFileType kObjectFile = llvm::CGFT_ObjectFile;
#endif

struct Machine {
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string triple;
};

Expected<Machine> machineFor(Target target) {
  initialiseTargets();
  std::string triple = target == Target::Cpu ? llvm::sys::getDefaultTargetTriple() : "nvptx64-nvidia-cuda";
  std::string error;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!t) return Error{"LLVM has no target for " + triple + ": " + error};
  // PTX for sm_70: the kernels use nothing newer, and the driver compiles it for the GPU it
  // runs on (Volta, Ampere, Hopper and later alike).
  std::string cpu = "sm_70", features = "+ptx78";
  if (target == Target::Cpu) {
    cpu = llvm::sys::getHostCPUName().str();
    features.clear();
#if LLVM_VERSION_MAJOR >= 19  // the features are returned, empty when unknown
    const llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
#else
    llvm::StringMap<bool> host;
    if (!llvm::sys::getHostCPUFeatures(host)) host.clear();
#endif
    for (const auto& f : host) features += (features.empty() ? "" : ",") + std::string(f.second ? "+" : "-") + f.first().str();
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(triple, cpu, features, options, llvm::Reloc::PIC_,
                                                                 std::nullopt, kAggressive));
  if (!tm) return Error{"LLVM could not create a target machine for " + triple + " (" + cpu + ")"};
  return Machine{std::move(tm), triple};
}

void optimise(llvm::Module& module, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

std::string describe(const KernelInfo& k, const char* comment) {
  std::string out = std::string(comment) + " kernel " + k.name + ":";
  for (size_t i = 0; i < k.specNames.size(); ++i) out += (i ? ", " : " ") + k.specNames[i];
  out += "\n" + std::string(comment) + "   " + k.body + "\n";
  return out;
}

struct Built {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  Machine machine;
  std::vector<KernelInfo> kernels;
};

Expected<Built> build(const ir::Graph& graph, Target target) {
  Expected<Machine> machine = machineFor(target);
  if (!machine) return machine.error();
  Built out{std::make_unique<llvm::LLVMContext>(), nullptr, std::move(*machine), listKernels(graph)};
  out.module = std::make_unique<llvm::Module>(graph.name(), *out.context);
  out.module->setTargetTriple(out.machine.triple);
  out.module->setDataLayout(out.machine.tm->createDataLayout());
  const std::string features = out.machine.tm->getTargetFeatureString().str();
  CpuMath cpuMath(*out.module, features.find("+avx2") != std::string::npos,
                  features.find("+avx512f") != std::string::npos);
  LibdeviceMath gpuMath(*out.module);
  MathLibrary& math = target == Target::Cpu ? static_cast<MathLibrary&>(cpuMath) : gpuMath;
  std::map<std::string, bool> done;
  for (const auto& n : graph.nodes()) {
    const std::string name = ir::generatedKernelName(*n);
    if (name.empty() || !done.emplace(name, true).second) continue;
    Status s = n->op().role == ir::OpRole::FusedRegion ? addFusedKernel(*out.module, *n, name, target, math)
                                                        : addAdamwKernel(*out.module, n->operand(0)->type().dtype, name, target);
    if (!s) return s.error().withContext("codegen of " + n->specName() + ": ");
  }
  if (target == Target::Nvptx) {
    // $CUDA_HOME's, NVIDIA's default install, then Debian's nvidia-cuda-toolkit.
    std::string libdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
    if (!std::filesystem::exists(libdevice) && std::filesystem::exists("/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc"))
      libdevice = "/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc";
    if (const char* home = std::getenv("CUDA_HOME"))
      if (std::string path = std::string(home) + "/nvvm/libdevice/libdevice.10.bc"; std::filesystem::exists(path))
        libdevice = path;
    llvm::SMDiagnostic diag;
    std::unique_ptr<llvm::Module> lib = llvm::parseIRFile(libdevice, diag, *out.context);
    if (!lib) return Error{"cannot read CUDA's libdevice (" + libdevice + "): " + diag.getMessage().str()};
    lib->setTargetTriple(out.machine.triple);
    lib->setDataLayout(out.module->getDataLayout());
    if (llvm::Linker::linkModules(*out.module, std::move(lib), llvm::Linker::LinkOnlyNeeded))
      return Error{"linking libdevice failed"};
    llvm::internalizeModule(*out.module, [&](const llvm::GlobalValue& g) { return done.count(g.getName().str()) > 0; });
  }
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*out.module, &os)) return Error{"internal: generated LLVM IR is invalid: " + os.str(), ErrorKind::Internal};
  optimise(*out.module, *out.machine.tm);
  return out;
}

Expected<std::string> emitFile(Built& built, llvm::CodeGenFileType type) {
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (built.machine.tm->addPassesToEmitFile(pm, os, nullptr, type))
    return Error{"LLVM cannot emit this file type for " + built.machine.triple};
  pm.run(*built.module);
  return std::string(buffer.begin(), buffer.end());
}

// Runs argv without a shell; the exit status, or -1 when it could not start.
int runProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::vector<KernelInfo> listKernels(const ir::Graph& graph) {
  std::vector<KernelInfo> kernels;
  std::map<std::string, bool> seen;
  for (const auto& n : graph.nodes()) {
    std::string name = ir::generatedKernelName(*n);
    if (name.empty() || !seen.emplace(name, true).second) continue;
    const std::string body = ir::getString(n->attrs(), "body").value_or("one-pass AdamW update (adamw_step {fused = true})");
    KernelInfo info{name, {}, body};
    if (n->op().role != ir::OpRole::FusedRegion) info.specNames.push_back(std::string(n->opName()) + " @" + n->specName());
    if (Expected<std::shared_ptr<const ir::FusedBody>> b = ir::cachedFusedBody(body))
      for (const ir::FusedStep& s : (*b)->steps) info.specNames.push_back(std::string(s.op->name) + " @" + s.specName);
    kernels.push_back(std::move(info));
  }
  return kernels;
}

Expected<std::string> emitCpuLlvm(const ir::Graph& graph) {
  Expected<Built> built = build(graph, Target::Cpu);
  if (!built) return built.error();
  std::string out = "; " + std::to_string(built->kernels.size()) + " generated kernel(s) of graph " + graph.name() +
                    ", optimised for " + built->machine.triple + " (" + built->machine.tm->getTargetCPU().str() + ")\n";
  for (const KernelInfo& k : built->kernels) {
    out += "\n" + describe(k, ";");
    std::string text;
    llvm::raw_string_ostream os(text);
    if (llvm::Function* f = built->module->getFunction(k.name)) f->print(os);
    out += os.str();
  }
  return out;
}

Expected<std::string> emitPtx(const ir::Graph& graph) {
  Expected<Built> built = build(graph, Target::Nvptx);
  if (!built) return built.error();
  Expected<std::string> ptx = emitFile(*built, kAssemblyFile);
  if (!ptx) return ptx.error();
  std::string header = "// " + std::to_string(built->kernels.size()) + " generated kernel(s) of graph " + graph.name() +
                       " for sm_70; each a grid-stride loop over n elements: a region is NAME(operands..., results..., i64 n, i64 seed, "
                       "i64 step, rng streams...), a one-pass AdamW update NAME(param, grad, m, v, i64 n, 9 doubles)\n";
  for (const KernelInfo& k : built->kernels) header += describe(k, "//");
  return header + *ptx;
}

Expected<std::string> buildCpuSharedObject(const ir::Graph& graph) {
  Expected<Built> built = build(graph, Target::Cpu);
  if (!built) return built.error();
  if (built->kernels.empty()) return Error{"the graph runs no generated kernels"};
  Expected<std::string> object = emitFile(*built, kObjectFile);
  if (!object) return object.error();
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  char pattern[] = "gradc-kernels-XXXXXX";
  std::string templ = (dir / pattern).string();
  if (!mkdtemp(templ.data())) return Error{"cannot create a temporary folder for the kernels in " + dir.string()};
  const std::filesystem::path work = templ;
  const std::filesystem::path obj = work / "kernels.o", so = work / "kernels.so";
  {
    std::ofstream f(obj, std::ios::binary);
    f.write(object->data(), static_cast<std::streamsize>(object->size()));
    if (!f) return Error{"cannot write " + obj.string()};
  }
  const char* driver = std::getenv("CC");
  const int status =
      runProgram({driver && *driver ? driver : "cc", "-shared", "-o", so.string(), obj.string(),
                  "-l:libsleefgnuabi.so.3", "-lm"});
  std::string bytes;
  if (status == 0) {
    std::ifstream f(so, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    bytes = s.str();
  }
  std::filesystem::remove_all(work, ec);
  if (status != 0)
    return Error{std::string("linking the CPU kernels failed: '") + (driver && *driver ? driver : "cc") +
                 " -shared' " + (status < 0 ? "could not run" : "exited with status " + std::to_string(status)) +
                 " (a C compiler driver links generated kernels with libm and SLEEF's libsleefgnuabi.so.3: install "
                 "build-essential and libsleef3, or set CC)"};
  return bytes;
}

}  // namespace gradc::codegen
