#include "codegen/kernel_builder.h"

#include <llvm/IR/Function.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/iteration_space.h"
#include "ir/fused_body.h"

namespace gradc::codegen {
namespace {

using llvm::Value;

struct Body {
  std::shared_ptr<const ir::FusedBody> steps;
  IterationSpace space;
  llvm::Type* element;
  ir::Shape shape;  // the iteration space before merging dimensions (position-dependent ops read it)
};

// The body's results for the element at `c.index`: `load(k)` gives operand k's element,
// `streamOf(r)` the RNG inputs of the r-th random step.
template <class Load, class Streams>
Expected<std::vector<Value*>> computeElement(ElementContext c, const ir::FusedBody& body, Load load, Streams streamOf) {
  std::vector<Value*> inputs;
  std::vector<Value*> steps;
  int randomSteps = 0;
  for (const ir::FusedStep& step : body.steps) {
    if (step.op->random) c.random = streamOf(randomSteps++);
    const ElementOp* op = findElementOp(step.op->name);
    if (!op) return Error{"codegen has no element rule for op '" + std::string(step.op->name) + "'"};
    std::vector<Value*> operands;
    for (const ir::FusedOperand& o : step.operands) {
      if (!o.isInput) {
        operands.push_back(steps[static_cast<size_t>(o.index)]);
        continue;
      }
      if (static_cast<size_t>(o.index) >= inputs.size()) inputs.resize(static_cast<size_t>(o.index) + 1, nullptr);
      if (!inputs[static_cast<size_t>(o.index)]) inputs[static_cast<size_t>(o.index)] = load(o.index);
      operands.push_back(inputs[static_cast<size_t>(o.index)]);
    }
    steps.push_back(op->emit(c, operands, step.attrs));
  }
  std::vector<Value*> results;
  for (int s : body.outputs) results.push_back(steps[static_cast<size_t>(s)]);
  return results;
}

// Offset of `index` (a flat position in the iteration space's leading dimensions, all but
// the last `skipInner`) in operand k: sum over dimensions of its coordinate times the stride.
Value* offsetOf(llvm::IRBuilder<>& b, const IterationSpace& space, size_t k, Value* index, size_t dims) {
  llvm::Type* i64 = b.getInt64Ty();
  Value* offset = llvm::ConstantInt::get(i64, 0);
  Value* rest = index;
  for (size_t d = dims; d-- > 0;) {
    const std::int64_t extent = space.extents[d];
    const std::int64_t stride = space.strides[k][d];
    Value* coordinate = d == 0 ? rest : b.CreateURem(rest, llvm::ConstantInt::get(i64, extent));
    if (d > 0) rest = b.CreateUDiv(rest, llvm::ConstantInt::get(i64, extent));
    if (stride != 0) offset = b.CreateAdd(offset, b.CreateMul(coordinate, llvm::ConstantInt::get(i64, stride)));
  }
  return offset;
}

// `f` takes (pointer per operand and result, begin, end); every pointer is noalias.
Status buildCpu(llvm::Function* f, const Body& body, MathLibrary& math, size_t numInputs, size_t numOutputs) {
  llvm::LLVMContext& ctx = f->getContext();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* i64 = b.getInt64Ty();
  const IterationSpace& space = body.space;
  const size_t dims = space.extents.size();
  const std::int64_t rowLength = space.extents.back();

  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* rowHead = llvm::BasicBlock::Create(ctx, "row", f);
  auto* inner = llvm::BasicBlock::Create(ctx, "element", f);
  auto* rowDone = llvm::BasicBlock::Create(ctx, "row.done", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);

  b.SetInsertPoint(entry);
  std::vector<Value*> pointers;
  for (size_t k = 0; k < numInputs + numOutputs; ++k) pointers.push_back(f->getArg(static_cast<unsigned>(k)));
  Value* begin = f->getArg(static_cast<unsigned>(numInputs + numOutputs));
  Value* end = f->getArg(static_cast<unsigned>(numInputs + numOutputs + 1));
  Value* scalars = f->getArg(static_cast<unsigned>(numInputs + numOutputs + 2));
  auto scalar = [&](int k) { return b.CreateLoad(i64, b.CreateConstInBoundsGEP1_64(i64, scalars, static_cast<std::uint64_t>(k))); };
  RandomStream run{scalar(0), scalar(1), nullptr, nullptr};
  std::vector<RandomStream> streams;
  for (const ir::FusedStep& step : body.steps->steps)
    if (step.op->random) {
      const int r = static_cast<int>(streams.size());
      streams.push_back({run.seed, run.step, scalar(2 + 2 * r), scalar(3 + 2 * r)});
    }
  b.CreateCondBr(b.CreateICmpSLT(begin, end), rowHead, exit);

  // One row (or the part of it in [begin, end)) per iteration.
  b.SetInsertPoint(rowHead);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(begin, entry);
  Value* length = llvm::ConstantInt::get(i64, rowLength);
  Value* row = b.CreateUDiv(i, length, "row.index");
  Value* column = b.CreateURem(i, length, "column");
  Value* rowEnd = b.CreateMul(b.CreateAdd(row, llvm::ConstantInt::get(i64, 1)), length);
  Value* stop = b.CreateSelect(b.CreateICmpSLT(end, rowEnd), end, rowEnd, "stop");
  Value* count = b.CreateSub(stop, i, "count");
  std::vector<Value*> rowBase;  // per operand: its element at (row, column)
  // Operand k's offset `steps` elements along the row: steps x its inner stride (0 when it is
  // broadcast along the row; 1 for contiguous rows, which the loop vectoriser reads as vectors).
  auto along = [&](size_t k, Value* steps) -> Value* {
    const std::int64_t inner = space.strides[k].back();
    if (inner == 0) return nullptr;
    return inner == 1 ? steps : b.CreateMul(steps, llvm::ConstantInt::get(i64, inner));
  };
  for (size_t k = 0; k < numInputs; ++k) {
    Value* base = offsetOf(b, space, k, row, dims - 1);
    if (Value* step = along(k, column)) base = b.CreateAdd(base, step);
    rowBase.push_back(base);
  }
  b.CreateBr(inner);

  b.SetInsertPoint(inner);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  j->addIncoming(llvm::ConstantInt::get(i64, 0), rowHead);
  Value* out = b.CreateAdd(i, j);
  ElementContext c{b, body.element, math, out, &body.shape, {}};
  Expected<std::vector<Value*>> results = computeElement(
      c, *body.steps,
      [&](int k) -> Value* {
        const size_t kk = static_cast<size_t>(k);
        Value* step = along(kk, j);
        Value* at = step ? b.CreateAdd(rowBase[kk], step) : rowBase[kk];
        return b.CreateLoad(body.element, b.CreateInBoundsGEP(body.element, pointers[kk], at));
      },
      [&](int r) { return streams[static_cast<size_t>(r)]; });
  if (!results) return results.error();
  for (size_t m = 0; m < numOutputs; ++m)
    b.CreateStore((*results)[m], b.CreateInBoundsGEP(body.element, pointers[numInputs + m], out));
  Value* next = b.CreateAdd(j, llvm::ConstantInt::get(i64, 1));
  j->addIncoming(next, inner);
  b.CreateCondBr(b.CreateICmpSLT(next, count), inner, rowDone);

  b.SetInsertPoint(rowDone);
  i->addIncoming(stop, rowDone);
  b.CreateCondBr(b.CreateICmpSLT(stop, end), rowHead, exit);

  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return {};
}

Status buildNvptx(llvm::Function* f, const Body& body, MathLibrary& math, size_t numInputs, size_t numOutputs) {
  llvm::LLVMContext& ctx = f->getContext();
  llvm::Module* module = f->getParent();
  llvm::IRBuilder<> b(ctx);
  llvm::Type* i64 = b.getInt64Ty();
  const IterationSpace& space = body.space;
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "element", f);
  auto* exit = llvm::BasicBlock::Create(ctx, "exit", f);
  b.SetInsertPoint(entry);
  const auto [first, stride] = gridStride(b, *module);
  const unsigned nArg = static_cast<unsigned>(numInputs + numOutputs);
  Value* n = f->getArg(nArg);
  b.CreateCondBr(b.CreateICmpSLT(first, n), loop, exit);

  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(first, entry);
  ElementContext c{b, body.element, math, i, &body.shape, {}};
  Expected<std::vector<Value*>> results = computeElement(
      c, *body.steps,
      [&](int k) -> Value* {
        const size_t kk = static_cast<size_t>(k);
        Value* at = offsetOf(b, space, kk, i, space.extents.size());
        return b.CreateLoad(body.element, b.CreateInBoundsGEP(body.element, f->getArg(static_cast<unsigned>(kk)), at));
      },
      [&](int r) {
        return RandomStream{f->getArg(nArg + 1), f->getArg(nArg + 2), f->getArg(nArg + 3 + 2 * static_cast<unsigned>(r)),
                            f->getArg(nArg + 4 + 2 * static_cast<unsigned>(r))};
      });
  if (!results) return results.error();
  for (size_t m = 0; m < numOutputs; ++m)
    b.CreateStore((*results)[m],
                  b.CreateInBoundsGEP(body.element, f->getArg(static_cast<unsigned>(numInputs + m)), i));
  Value* next = b.CreateAdd(i, stride);
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpSLT(next, n), loop, exit);
  b.SetInsertPoint(exit);
  b.CreateRetVoid();
  return {};
}

}  // namespace

GridStride gridStride(llvm::IRBuilder<>& b, llvm::Module& module) {
  auto sreg = [&](llvm::Intrinsic::ID id) {
    return b.CreateZExt(b.CreateCall(llvm::Intrinsic::getDeclaration(&module, id)), b.getInt64Ty());
  };
  llvm::Value* ntid = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  llvm::Value* first = b.CreateAdd(b.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), ntid),
                                   sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x));
  return {first, b.CreateMul(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x), ntid)};
}

llvm::Function* addBufferArrayEntry(llvm::Module& module, const std::string& name, llvm::Function* loop,
                                    unsigned buffers) {
  llvm::LLVMContext& ctx = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64, ptr}, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", f));
  std::vector<Value*> args;
  for (unsigned k = 0; k < buffers; ++k) args.push_back(b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, f->getArg(0), k)));
  for (unsigned k = 1; k <= 3; ++k) args.push_back(f->getArg(k));
  b.CreateCall(loop, args);
  b.CreateRetVoid();
  return f;
}

Status addFusedKernel(llvm::Module& module, const ir::Node& node, const std::string& name, Target target,
                      MathLibrary& math) {
  if (node.op().role != ir::OpRole::FusedRegion) return Error{"internal: codegen of a " + std::string(node.opName()) + " node", ErrorKind::Internal};
  Expected<std::shared_ptr<const ir::FusedBody>> steps = ir::cachedFusedBody(*ir::getString(node.attrs(), "body"));
  if (!steps) return steps.error();
  const std::vector<ir::TensorType> operands = node.operandTypes();
  Expected<std::vector<std::vector<std::int64_t>>> strides = ir::fusedOperandStrides(node.attrs(), operands);
  if (!strides) return strides.error();
  llvm::LLVMContext& ctx = module.getContext();
  const ir::DType dtype = node.result()->type().dtype;
  llvm::Type* element = dtype == ir::DType::f64 ? llvm::Type::getDoubleTy(ctx) : llvm::Type::getFloatTy(ctx);
  Body body{*steps, iterationSpaceOf(node.result()->type().shape, operands, *strides), element,
            node.result()->type().shape};
  const size_t numInputs = node.numOperands(), numOutputs = node.numResults();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
  llvm::Type* voidTy = llvm::Type::getVoidTy(ctx);
  if (target == Target::Cpu) {
    // The loop takes every buffer as its own noalias argument; the exported entry point reads
    // them from the buffer array and calls it (inlined, the noalias facts become scopes).
    std::vector<llvm::Type*> params(numInputs + numOutputs, ptr);
    params.push_back(i64);
    params.push_back(i64);
    params.push_back(ptr);
    auto* loopType = llvm::FunctionType::get(voidTy, params, false);
    auto* loop = llvm::Function::Create(loopType, llvm::Function::InternalLinkage, name + ".loop", module);
    loop->addFnAttr(llvm::Attribute::NoUnwind);
    loop->addFnAttr(llvm::Attribute::AlwaysInline);
    for (size_t k = 0; k < numInputs + numOutputs + 3; ++k) {
      if (k == numInputs + numOutputs || k == numInputs + numOutputs + 1) continue;  // begin, end
      loop->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::NoAlias);
      if (k < numInputs || k == numInputs + numOutputs + 2) loop->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::ReadOnly);
    }
    if (Status s = buildCpu(loop, body, math, numInputs, numOutputs); !s) return s;
    addBufferArrayEntry(module, name, loop, static_cast<unsigned>(numInputs + numOutputs));
    return {};
  }
  std::vector<llvm::Type*> params(numInputs + numOutputs, ptr);
  params.push_back(i64);  // n
  params.push_back(i64);  // seed
  params.push_back(i64);  // step
  for (const ir::FusedStep& step : (*steps)->steps)
    if (step.op->random) {
      params.push_back(i64);  // rng
      params.push_back(i64);  // rng_offset
    }
  auto* type = llvm::FunctionType::get(voidTy, params, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
  f->setCallingConv(llvm::CallingConv::PTX_Kernel);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t k = 0; k < numInputs + numOutputs; ++k) {
    f->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::NoAlias);
    if (k < numInputs) f->addParamAttr(static_cast<unsigned>(k), llvm::Attribute::ReadOnly);
  }
  return buildNvptx(f, body, math, numInputs, numOutputs);
}

}  // namespace gradc::codegen
