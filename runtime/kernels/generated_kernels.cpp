#include "runtime/kernels/generated_kernels.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ir/fused_body.h"

namespace gradc::runtime {
namespace {

// A CPU shared object's kernels: every generated kernel of the graph, found with dlsym.
class SharedObjectKernels final : public GeneratedKernels {
 public:
  SharedObjectKernels(void* handle, std::filesystem::path path) : GeneratedKernels(std::move(path)), handle_(handle) {}
  SharedObjectKernels(const SharedObjectKernels&) = delete;
  SharedObjectKernels& operator=(const SharedObjectKernels&) = delete;
  ~SharedObjectKernels() override { dlclose(handle_); }

  bool has(std::string_view name) const override { return dlsym(handle_, std::string(name).c_str()) != nullptr; }
  Expected<void*> function(std::string_view name, const Device&) const override {
    if (void* fn = dlsym(handle_, std::string(name).c_str())) return fn;
    return Error{"the generated kernels " + path().string() + " have no kernel " + std::string(name)};
  }
  bool carries(const ir::Node&) const override { return true; }

 private:
  void* handle_;
};

// Whether all of `bytes` went to `fd` (errno set when not).
bool writeAll(int fd, std::string_view bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A sealed memory file holding `bytes`, or -1 (errno set).
int sealedMemoryFile(std::string_view bytes) {
  const int fd = ::memfd_create("gradc-kernels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (!writeAll(fd, bytes) || ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// `bytes` written to a file in a fresh private folder (mode 0700), for systems whose memory
// files cannot be mapped executable; "" on failure. The caller removes the folder.
std::string privateCopy(std::string_view bytes) {
  std::error_code ec;
  std::string folder = (std::filesystem::temp_directory_path(ec) / "gradc-kernels-XXXXXX").string();
  if (ec || !::mkdtemp(folder.data())) return {};
  const std::string file = folder + "/kernels.so";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  const bool ok = fd >= 0 && writeAll(fd, bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) std::filesystem::remove_all(folder, ec);
  return ok ? file : std::string();
}

}  // namespace

Expected<std::shared_ptr<const GeneratedKernels>> loadSharedObjectKernels(const std::filesystem::path& sharedObject) {
  dlerror();
  void* handle = dlopen(sharedObject.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Error{"cannot load the generated kernels " + sharedObject.string() + ": " + (why ? why : "dlopen failed")};
  }
  return std::shared_ptr<const GeneratedKernels>(std::make_shared<SharedObjectKernels>(handle, sharedObject));
}

Expected<std::shared_ptr<const GeneratedKernels>> sharedObjectKernelsFromBytes(std::string_view bytes,
                                                                               const std::filesystem::path& shownAs) {
  void* handle = nullptr;
  std::string why;
  if (const int fd = sealedMemoryFile(bytes); fd >= 0) {
    dlerror();
    handle = dlopen(("/proc/self/fd/" + std::to_string(fd)).c_str(), RTLD_NOW | RTLD_LOCAL);
    ::close(fd);  // the mapping dlopen made keeps the memory
  }
  if (!handle) {
    const std::string copy = privateCopy(bytes);
    if (copy.empty()) return Error{"cannot load the generated kernels " + shownAs.string() + ": " + std::strerror(errno)};
    dlerror();
    handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* reason = dlerror();
      why = reason ? reason : "dlopen failed";
    }
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(copy).parent_path(), ec);
  }
  if (!handle) return Error{"cannot load the generated kernels " + shownAs.string() + ": " + why};
  return std::shared_ptr<const GeneratedKernels>(std::make_shared<SharedObjectKernels>(handle, shownAs));
}

Status GeneratedKernels::covers(const ir::Graph& graph) const {
  for (const auto& n : graph.nodes()) {
    const std::string name = ir::generatedKernelName(*n);
    if (!name.empty() && carries(*n) && !has(name))
      return Error{"the generated kernels " + path_.string() + " have no kernel " + name + " for the " +
                   std::string(n->opName()) + " node of " + n->specName() +
                   " (the graph and its kernels come from different compiles)"};
  }
  return {};
}

bool needsGeneratedKernels(const ir::Graph& graph) {
  for (const auto& n : graph.nodes())
    if (!ir::generatedKernelName(*n).empty()) return true;
  return false;
}

}  // namespace gradc::runtime
