#include "runtime/generated_kernels.h"

#include <dlfcn.h>

#include "ir/fused_body.h"

namespace gradc::runtime {

Expected<std::shared_ptr<const GeneratedKernels>> GeneratedKernels::load(const std::filesystem::path& sharedObject) {
  dlerror();
  void* handle = dlopen(sharedObject.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Error{"cannot load the generated kernels " + sharedObject.string() + ": " + (why ? why : "dlopen failed")};
  }
  return std::shared_ptr<const GeneratedKernels>(new GeneratedKernels(handle, sharedObject));
}

GeneratedKernels::~GeneratedKernels() {
  if (handle_) dlclose(handle_);
}

void* GeneratedKernels::find(std::string_view name) const { return dlsym(handle_, std::string(name).c_str()); }

Status GeneratedKernels::covers(const ir::Graph& graph) const {
  for (const auto& n : graph.nodes()) {
    const std::string name = ir::generatedKernelName(*n);
    if (!name.empty() && !find(name))
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
