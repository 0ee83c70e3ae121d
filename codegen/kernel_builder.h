// Lowers one fused node (ir/ops_fused.cpp) to an LLVM function: the kernel ABI.
//
// CPU:   void NAME(void* const* buffers, int64_t begin, int64_t end, const int64_t* scalars)
//        buffers = the node's operands in operand order, then its results in result order;
//        computes the elements [begin, end) of the iteration space (row-major over the result
//        shape), so the runtime may split a node's elements among threads in any way.
//        scalars = seed, step, then (rng, rng_offset) per random step (ir::fusedRandomStreams).
// NVPTX: kernel NAME(ptr operand0, ..., ptr result0, ..., i64 n, i64 seed, i64 step,
//        i64 rng0, i64 rng_offset0, ...), a grid-stride loop over [0, n); launched with any grid
//        (one thread per element is the natural choice).
//
// Both loop over the reduced iteration space (codegen/iteration_space.h). The CPU loop walks
// one row (the innermost dimension) at a time: per row, each operand's base offset is computed
// once; inside the row every operand is either a contiguous run or one broadcast element, which
// LLVM's loop vectoriser turns into vector loads and arithmetic. Buffers never overlap (the
// memory plan gives every live buffer its own bytes), so every pointer is noalias.
#pragma once

#include <string>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "codegen/elementwise_ops.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::codegen {

enum class Target { Cpu, Nvptx };

// The exported CPU entry point `name(void* const* buffers, i64 begin, i64 end, ptr scalars)`: loads
// the first `buffers` pointers of the array and calls `loop(buffer..., begin, end, scalars)`, whose
// pointer arguments are noalias (inlined, LLVM keeps that as scopes).
llvm::Function* addBufferArrayEntry(llvm::Module& module, const std::string& name, llvm::Function* loop,
                                    unsigned buffers);

// A GPU kernel's grid-stride loop: this thread's first element (block index x block size +
// thread index) and the stride (blocks x block size), as i64, built at `b`'s insertion point.
struct GridStride {
  llvm::Value* first;
  llvm::Value* stride;
};
GridStride gridStride(llvm::IRBuilder<>& b, llvm::Module& module);

// Adds the kernel of `node` (a `fused` node) to `module` as function `name`.
Status addFusedKernel(llvm::Module& module, const ir::Node& node, const std::string& name, Target target,
                      MathLibrary& math);

}  // namespace gradc::codegen
