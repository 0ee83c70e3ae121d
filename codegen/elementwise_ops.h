// How each fusable op computes one element, in LLVM IR: the codegen side of the op table.
//
// One entry per op that ir::isFusableOp accepts (a test checks none is missing). Dropout draws its
// mask from Philox-4x32-10 exactly as runtime/core/counter_rng.cpp does, so a fused dropout zeroes the
// same elements as the unfused kernel, and recomputation reproduces it bit for bit. An entry
// receives its operands' element values (already loaded, broadcast and of the region's floating
// type) and the step's attributes, and returns the result element. The formulas are ATen's CPU
// kernels', constant for constant (constants rounded to the element type, as ATen's vectorised
// kernels do), so a fused region agrees with the unfused ATen path to a few ulp; the only
// differences are the transcendental functions, which come from the target's math library
// (MathLibrary: libm and SLEEF's 1-ulp vector functions on the CPU, as ATen's exp and tanh;
// libdevice on NVIDIA GPUs), and gelu's normal CDF in f32, which comes from an erfc fit and two
// exps instead of erf (elementwise_ops.cpp: faster, and exact to 5e-7 relative in the negative
// tail, where ATen's 1 + erf cancels).
#pragma once

#include <span>
#include <string_view>

#include <llvm/IR/IRBuilder.h>

#include "ir/attribute.h"
#include "ir/tensor_type.h"

namespace gradc::codegen {

// exp, tanh and erf of the element type, as calls into the target's math library.
class MathLibrary {
 public:
  virtual ~MathLibrary() = default;
  virtual llvm::Value* exp(llvm::IRBuilder<>& b, llvm::Value* x) = 0;
  virtual llvm::Value* tanh(llvm::IRBuilder<>& b, llvm::Value* x) = 0;
  virtual llvm::Value* erf(llvm::IRBuilder<>& b, llvm::Value* x) = 0;
};

// What a random op's rule draws from (ops the op table marks `random`: dropout): the element's
// position and the counter-based RNG's inputs, all i64 values known only at run time (so one
// kernel serves every layer; runtime/core/counter_rng.h defines the stream).
struct RandomStream {
  llvm::Value* seed = nullptr;    // the run's seed
  llvm::Value* step = nullptr;    // the training step
  llvm::Value* stream = nullptr;  // the step's `rng` attribute
  llvm::Value* offset = nullptr;  // its `rng_offset` (0 when absent)
};

struct ElementContext {
  llvm::IRBuilder<>& b;
  llvm::Type* type;  // float or double
  MathLibrary& math;
  llvm::Value* index = nullptr;  // the element's row-major position in the iteration space (i64)
  const ir::Shape* space = nullptr;  // the iteration space (the node's result shape)
  RandomStream random;           // set for random steps
  llvm::Value* constant(double v) const { return llvm::ConstantFP::get(type, v); }
};

using ElementFn = llvm::Value* (*)(const ElementContext& c, std::span<llvm::Value* const> x, const ir::AttrMap& attrs);

struct ElementOp {
  std::string_view op;
  ElementFn emit;
};

// nullptr when codegen cannot compute the op.
const ElementOp* findElementOp(std::string_view op);
std::span<const ElementOp> elementOps();

}  // namespace gradc::codegen
