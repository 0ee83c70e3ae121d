// Generated kernels of a graph: every distinct fused node (ir/ops_fused.cpp) compiled once, for
// the host CPU (a shared object the runtime loads with dlopen) and for NVIDIA GPUs (PTX text for
// sm_70, which the driver compiles for any GPU from Volta on: runtime/cuda/ptx_kernels.h); and
// the one-pass AdamW update (codegen/optimizer_kernels.h), for both, when the graph's
// adamw_step nodes use it.
//
// Nodes with the same body and types share one kernel (ir::fusedKernelName), so a model's
// repeated layers cost one compilation. Each kernel is built by codegen/kernel_builder.h, then
// the module is optimised at O3 for its target (LLVM's loop vectoriser does the SIMD).
// The CPU object is linked into a shared object by the system C compiler driver (`cc -shared`,
// with libm and SLEEF's GNU-ABI vector functions: exp, tanh and erf, vectorised); the PTX links in CUDA's
// libdevice for them and keeps only the kernels.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::codegen {

struct KernelInfo {
  std::string name;                    // the exported symbol
  std::vector<std::string> specNames;  // the fused ops' spec layers, in step order
  std::string body;                    // the fused node's body text
};

// The distinct kernels of `graph`, in the order of their first node.
std::vector<KernelInfo> listKernels(const ir::Graph& graph);

// `gradc compile --emit llvm`: every kernel's optimised LLVM IR for the host CPU, each after a
// comment naming its fused ops and their spec layers.
Expected<std::string> emitCpuLlvm(const ir::Graph& graph);
// `gradc compile --emit ptx`: the PTX module for sm_70, with the same comments.
Expected<std::string> emitPtx(const ir::Graph& graph);
// The host CPU's shared object of every kernel (the file's bytes). An Error when the graph has
// no fused nodes, or when the object cannot be linked (no C compiler driver).
Expected<std::string> buildCpuSharedObject(const ir::Graph& graph);

}  // namespace gradc::codegen
