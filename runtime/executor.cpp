#include "runtime/executor.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <unordered_map>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/dtype_map.h"

namespace gradc::runtime {
namespace {

std::optional<ir::TensorType> typeOf(const at::Tensor& t) {
  std::optional<ir::DType> dtype = fromScalarType(t.scalar_type());
  if (!dtype) return std::nullopt;
  return ir::TensorType{*dtype, t.sizes().vec()};
}

bool hasType(const at::Tensor& t, const ir::TensorType& type) {
  if (!t.defined()) return false;
  std::optional<ir::DType> dtype = fromScalarType(t.scalar_type());
  return dtype && *dtype == type.dtype && t.sizes() == c10::IntArrayRef(type.shape);
}

// Runs a kernel, turning ATen exceptions into an Error that names the op.
Expected<std::vector<at::Tensor>> callKernel(KernelFn kernel, const KernelArgs& args) {
  try {
    return kernel(args);
  } catch (const c10::Error& e) {
    return Error{"kernel '" + std::string(args.node.opName()) + "' failed: " + e.what_without_backtrace()};
  } catch (const std::exception& e) {
    return Error{"kernel '" + std::string(args.node.opName()) + "' failed: " + e.what()};
  }
}

// "at '%3 = relu(%2) : f32[4] fwd  # act': " -- the node as printed, like the verifier does.
std::string atNode(const ir::Graph& graph, const ir::Node& node) {
  return "at '" + ir::printNode(node, ir::ValueNames(graph)) + "': ";
}

}  // namespace

std::string describeTensor(const at::Tensor& tensor) {
  if (!tensor.defined()) return "an undefined tensor";
  if (std::optional<ir::TensorType> type = typeOf(tensor)) return ir::toString(*type);
  return std::string(c10::toString(tensor.scalar_type())) + ir::shapeToString(tensor.sizes().vec());
}

Status checkResults(const ir::Node& node, std::span<const at::Tensor> results,
                    std::span<const at::Tensor> operands) {
  if (results.size() != node.numResults())
    return Error{"kernel '" + std::string(node.opName()) + "' returned " + std::to_string(results.size()) +
                 " result(s), the node has " + std::to_string(node.numResults())};
  for (size_t i = 0; i < results.size(); ++i) {
    const ir::TensorType& expected = node.result(i)->type();
    if (!hasType(results[i], expected))
      return Error{"kernel '" + std::string(node.opName()) + "' result " + std::to_string(i) + " is " +
                   describeTensor(results[i]) + ", the IR type is " + ir::toString(expected)};
    if (node.op().view) continue;
    // The memory planner's model of non-view ops (passes/liveness.h).
    if (!results[i].is_contiguous())
      return Error{"kernel '" + std::string(node.opName()) + "' result " + std::to_string(i) +
                   " is not contiguous (non-view kernels return fresh contiguous tensors)"};
    for (const at::Tensor& operand : operands)
      if (operand.defined() && results[i].is_alias_of(operand))
        return Error{"kernel '" + std::string(node.opName()) + "' result " + std::to_string(i) +
                     " shares storage with an operand (only view ops may)"};
  }
  return {};
}

Expected<Executor> Executor::create(const ir::Graph& graph) {
  if (Status s = ir::verify(graph); !s) return Error{"cannot execute graph '" + graph.name() + "': " + s.message()};

  Executor exec(graph);
  std::unordered_map<const ir::Value*, int> slotOf;  // lookups only, never iterated
  auto newSlot = [&](const ir::Value* v) {
    int slot = exec.numSlots_++;
    slotOf.emplace(v, slot);
    return slot;
  };
  for (const auto& v : graph.inputs()) exec.inputs_.push_back({v.get(), v->hasUses() ? newSlot(v.get()) : kNoSlot});
  for (const auto& v : graph.params()) exec.params_.push_back({v.get(), v->hasUses() ? newSlot(v.get()) : kNoSlot});

  // Last use of each value: the index of the last node reading it.
  std::unordered_map<const ir::Value*, size_t> lastUse;
  const auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Value* v : nodes[i]->operands()) lastUse[v] = i;

  exec.steps_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& node = *nodes[i];
    const KernelFn* kernel = findKernel(node.opName());
    if (!kernel)
      return Error{"no kernel for op '" + std::string(node.opName()) + "' (node '" +
                   ir::printNode(node, ir::ValueNames(graph)) + "')"};
    Step step{&node, *kernel, {}, {}, {}};
    for (const ir::Value* v : node.operands()) {
      step.operands.push_back(slotOf.at(v));
      bool last = lastUse.at(v) == i && !v->isGraphOutput();
      int slot = slotOf.at(v);
      if (last && std::find(step.release.begin(), step.release.end(), slot) == step.release.end())
        step.release.push_back(slot);
    }
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* v = node.result(r);
      step.results.push_back(v->hasUses() ? newSlot(v) : kNoSlot);
    }
    exec.steps_.push_back(std::move(step));
  }
  for (const ir::GraphOutput& out : graph.outputs()) exec.outputs_.push_back({out.name, slotOf.at(out.value)});
  return exec;
}

Expected<TensorMap> Executor::run(const TensorMap& inputs, TensorMap& state, const RunContext& ctx) const {
  std::vector<at::Tensor> slots(static_cast<size_t>(numSlots_));

  auto bind = [&](const Binding& b, const TensorMap& from, std::string_view what) -> Status {
    const std::string& name = b.value->name();
    auto it = from.find(name);
    if (it == from.end())
      return Error{std::string(what) + " '" + name + "' (" + ir::toString(b.value->type()) + ") is missing"};
    if (!hasType(it->second, b.value->type()))
      return Error{std::string(what) + " '" + name + "': expected " + ir::toString(b.value->type()) + ", got " +
                   describeTensor(it->second)};
    if (b.slot != kNoSlot) slots[static_cast<size_t>(b.slot)] = it->second;
    return {};
  };
  for (const Binding& b : inputs_)
    if (Status s = bind(b, inputs, "input"); !s) return Error{s.message()};
  for (const Binding& b : params_)
    if (Status s = bind(b, state, "parameter"); !s) return Error{s.message()};

  std::vector<at::Tensor> operands;
  for (const Step& step : steps_) {
    operands.clear();
    for (int slot : step.operands) operands.push_back(slots[static_cast<size_t>(slot)]);
    const KernelArgs args{*step.node, operands, ctx};
    if (beforeHook_) beforeHook_(*step.node);

    Expected<std::vector<at::Tensor>> results = [&] {
      if (!hook_) return callKernel(step.kernel, args);
      auto start = std::chrono::steady_clock::now();
      Expected<std::vector<at::Tensor>> r = callKernel(step.kernel, args);
      hook_(*step.node, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start));
      return r;
    }();
    if (!results) return Error{atNode(*graph_, *step.node) + results.error().message};
    if (Status s = checkResults(*step.node, *results, operands); !s)
      return Error{atNode(*graph_, *step.node) + s.message()};
    // Operand references go first, so a dead operand's memory is freed before the next node.
    operands.clear();
    for (size_t r = 0; r < step.results.size(); ++r)
      if (step.results[r] != kNoSlot) slots[static_cast<size_t>(step.results[r])] = std::move((*results)[r]);
    for (int slot : step.release) slots[static_cast<size_t>(slot)].reset();
  }

  TensorMap outputs;
  for (const OutputBinding& out : outputs_) outputs.emplace(out.name, slots[static_cast<size_t>(out.slot)]);
  return outputs;
}

Expected<std::vector<at::Tensor>> callOp(std::string_view opName, std::span<const at::Tensor> operands,
                                         const ir::AttrMap& attrs, const RunContext& ctx) {
  const KernelFn* kernel = findKernel(opName);
  if (!kernel) return Error{"no kernel for op '" + std::string(opName) + "'"};
  ir::Graph graph("call");
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::optional<ir::TensorType> type = operands[i].defined() ? typeOf(operands[i]) : std::nullopt;
    if (!type) return Error{std::string(opName) + ": operand " + std::to_string(i) + " is " + describeTensor(operands[i])};
    values.push_back(graph.addInput("x" + std::to_string(i), *type));
  }
  Expected<ir::Node*> node = graph.create(opName, values, attrs);
  if (!node) return Error{node.error().message};
  Expected<std::vector<at::Tensor>> results = callKernel(*kernel, KernelArgs{**node, operands, ctx});
  if (!results) return results;
  if (Status s = checkResults(**node, *results, operands); !s) return Error{s.message()};
  return results;
}

}  // namespace gradc::runtime
