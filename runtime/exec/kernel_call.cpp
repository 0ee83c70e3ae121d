// One kernel call, checked: ATen's exceptions turned into Errors that name the op, results
// checked against the node's IR types and the planner's model of them, and callOp, which runs
// one op eagerly outside any graph.
#include "runtime/exec/kernel_call.h"

#include <c10/util/Exception.h>

#include <exception>
#include <new>
#include <string>

#include "runtime/core/c10_message.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/executor.h"

namespace gradc::runtime {

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
    const std::string what = e.what_without_backtrace();
    return Error{"kernel '" + std::string(args.node.opName()) + "' failed: " + what,
                 saysOutOfMemory(what) ? ErrorKind::Environment : ErrorKind::User};
  } catch (const std::bad_alloc& e) {
    return environmentError("kernel '" + std::string(args.node.opName()) + "' failed: out of memory (" + e.what() + ")");
  } catch (const std::exception& e) {
    return Error{"kernel '" + std::string(args.node.opName()) + "' failed: " + e.what()};
  }
}

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
    // The memory planner's model of non-view ops (passes/memory/storage.h).
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

Expected<std::vector<at::Tensor>> callOp(std::string_view opName, std::span<const at::Tensor> operands,
                                         const ir::AttrMap& attrs, const RunContext& ctx) {
  const Device& device = ctx.device ? *ctx.device : cpuDevice();
  const KernelFn* kernel = findKernel(opName, device);
  if (!kernel) return Error{"no kernel for op '" + std::string(opName) + "' on " + device.name()};
  ir::Graph graph("call");
  std::vector<ir::Value*> values;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::optional<ir::TensorType> type = operands[i].defined() ? typeOf(operands[i]) : std::nullopt;
    if (!type) return Error{std::string(opName) + ": operand " + std::to_string(i) + " is " + describeTensor(operands[i])};
    values.push_back(graph.addInput("x" + std::to_string(i), *type));
  }
  Expected<ir::Node*> node = graph.create(opName, values, attrs);
  if (!node) return node.error();
  Expected<std::vector<at::Tensor>> results = callKernel(*kernel, KernelArgs{**node, operands, ctx});
  if (!results) return results;
  if (Status s = checkResults(**node, *results, operands); !s) return s.error();
  return results;
}

}  // namespace gradc::runtime
