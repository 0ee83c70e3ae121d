#include "codegen/optimizer_kernels.h"

#include <llvm/IR/IRBuilder.h>

#include <tuple>
#include <vector>

#include "codegen/kernel_builder.h"

namespace gradc::codegen {

namespace {

// The update of element `i` of the four buffers, with the nine scalars in the element type.
void updateElement(llvm::IRBuilder<>& b, llvm::Type* t, llvm::Value* i, llvm::Value* p, llvm::Value* g, llvm::Value* m,
                   llvm::Value* v, llvm::Value* const* scalars) {
  auto [gradScale, decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, rootBias2, eps, stepSize] =
      std::tuple(scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6], scalars[7],
                 scalars[8]);
  auto at = [&](llvm::Value* base) { return b.CreateInBoundsGEP(t, base, i); };
  llvm::Value* gi = b.CreateFMul(b.CreateLoad(t, at(g)), gradScale);
  llvm::Value* pi = b.CreateFMul(b.CreateLoad(t, at(p)), decay);
  llvm::Value* mi = b.CreateFAdd(b.CreateFMul(b.CreateLoad(t, at(m)), beta1), b.CreateFMul(gi, oneMinusBeta1));
  llvm::Value* vi =
      b.CreateFAdd(b.CreateFMul(b.CreateLoad(t, at(v)), beta2), b.CreateFMul(b.CreateFMul(gi, gi), oneMinusBeta2));
  llvm::Value* denom = b.CreateFAdd(b.CreateFDiv(b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, vi), rootBias2), eps);
  pi = b.CreateFAdd(pi, b.CreateFMul(stepSize, b.CreateFDiv(mi, denom)));
  b.CreateStore(pi, at(p));
  b.CreateStore(mi, at(m));
  b.CreateStore(vi, at(v));
}

// The GPU kernel: NAME(ptr param, ptr grad, ptr m, ptr v, i64 n, double s0, ..., double s8), a
// grid-stride loop over the n elements.
void addNvptxAdamw(llvm::Module& module, llvm::Type* t, const std::string& name) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* f64 = llvm::Type::getDoubleTy(ctx);
  std::vector<llvm::Type*> params{ptr, ptr, ptr, ptr, i64};
  params.insert(params.end(), 9, f64);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
  f->setCallingConv(llvm::CallingConv::PTX_Kernel);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned k = 0; k < 4; ++k) f->addParamAttr(k, llvm::Attribute::NoAlias);
  f->addParamAttr(1, llvm::Attribute::ReadOnly);
  llvm::IRBuilder<> b(ctx);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* body = llvm::BasicBlock::Create(ctx, "element", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  b.SetInsertPoint(entry);
  const auto [first, stride] = gridStride(b, module);
  llvm::Value* n = f->getArg(4);
  llvm::Value* scalars[9];
  for (unsigned k = 0; k < 9; ++k) scalars[k] = t == f64 ? f->getArg(5 + k) : b.CreateFPTrunc(f->getArg(5 + k), t);
  b.CreateCondBr(b.CreateICmpSLT(first, n), body, exit);
  b.SetInsertPoint(body);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(first, entry);
  updateElement(b, t, i, f->getArg(0), f->getArg(1), f->getArg(2), f->getArg(3), scalars);
  llvm::Value* next = b.CreateAdd(i, stride);
  i->addIncoming(next, body);
  b.CreateCondBr(b.CreateICmpSLT(next, n), body, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
}

}  // namespace

Status addAdamwKernel(llvm::Module& module, ir::DType dtype, const std::string& name, Target target) {
  if (dtype != ir::DType::f32 && dtype != ir::DType::f64)
    return Error{"the one-pass AdamW kernel updates f32 or f64 parameters"};
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* t = dtype == ir::DType::f64 ? llvm::Type::getDoubleTy(ctx) : llvm::Type::getFloatTy(ctx);
  if (target == Target::Nvptx) {
    addNvptxAdamw(module, t, name);
    return {};
  }
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* f64 = llvm::Type::getDoubleTy(ctx);
  llvm::Type* voidTy = llvm::Type::getVoidTy(ctx);

  // The loop, over noalias pointers (inlined into the entry point below).
  auto* loopType = llvm::FunctionType::get(voidTy, {ptr, ptr, ptr, ptr, i64, i64, ptr}, false);
  auto* loop = llvm::Function::Create(loopType, llvm::Function::InternalLinkage, name + ".loop", module);
  loop->addFnAttr(llvm::Attribute::NoUnwind);
  loop->addFnAttr(llvm::Attribute::AlwaysInline);
  for (unsigned k : {0u, 1u, 2u, 3u, 6u}) loop->addParamAttr(k, llvm::Attribute::NoAlias);
  loop->addParamAttr(1, llvm::Attribute::ReadOnly);
  loop->addParamAttr(6, llvm::Attribute::ReadOnly);
  llvm::IRBuilder<> b(ctx);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", loop);
  auto* body = llvm::BasicBlock::Create(ctx, "element", loop);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", loop);
  b.SetInsertPoint(entry);
  llvm::Value* begin = loop->getArg(4);
  llvm::Value* end = loop->getArg(5);
  llvm::Value* scalars[9];
  for (unsigned k = 0; k < 9; ++k) {
    llvm::Value* d = b.CreateLoad(f64, b.CreateConstInBoundsGEP1_64(f64, loop->getArg(6), k));
    scalars[k] = t == f64 ? d : b.CreateFPTrunc(d, t);
  }
  b.CreateCondBr(b.CreateICmpSLT(begin, end), body, exit);

  b.SetInsertPoint(body);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(begin, entry);
  updateElement(b, t, i, loop->getArg(0), loop->getArg(1), loop->getArg(2), loop->getArg(3), scalars);
  llvm::Value* next = b.CreateAdd(i, llvm::ConstantInt::get(i64, 1));
  i->addIncoming(next, body);
  b.CreateCondBr(b.CreateICmpSLT(next, end), body, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();

  addBufferArrayEntry(module, name, loop, 4);  // param, grad, m, v
  return {};
}

}  // namespace gradc::codegen
