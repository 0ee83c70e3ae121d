// The executor: runs an ir::Graph node by node, in program order, with the kernel table.
//
// create() does all per-graph work once: it verifies the graph, resolves every node's kernel
// (an op without one is an error naming it), numbers every value with a slot, and computes
// for each node which slots die after it (the last use of each value, graph outputs
// excepted). run() then only binds tensors, calls kernels and drops references, so an
// intermediate tensor is freed right after its last user -- the runtime counterpart of the
// memory planner's liveness.
//
// State: parameters and optimizer state (everything in graph.params()) live in a TensorMap the
// caller owns and passes to every run. Optimizer ops update those tensors in place, so after a
// training step `state` holds the new values; run() never replaces a state entry.
//
// Lifetime: the Executor keeps a pointer to the graph. The graph must outlive the Executor and
// must not be changed while it exists (create a new Executor after rewriting a graph).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/kernels.h"
#include "runtime/tensor_map.h"

namespace gradc::runtime {

class Executor {
 public:
  // Called after each node when set, with the node's wall time (kernel call only).
  using NodeHook = std::function<void(const ir::Node& node, std::chrono::nanoseconds elapsed)>;
  // Called right before each node's kernel when set, after the previous node's dead values were
  // released: a memory probe sees exactly the live set the node starts from.
  using BeforeNodeHook = std::function<void(const ir::Node& node)>;

  static Expected<Executor> create(const ir::Graph& graph);

  // One execution. Every graph input must be in `inputs` and every parameter in `state`, each
  // with exactly its IR type (extra entries are ignored). Returns the graph outputs by name; an
  // output that is an input or parameter is returned as that same tensor (not a copy).
  // Kernel failures (ATen errors) come back as an Error naming the node.
  Expected<TensorMap> run(const TensorMap& inputs, TensorMap& state, const RunContext& ctx) const;

  void setNodeHook(NodeHook hook) { hook_ = std::move(hook); }
  void setBeforeNodeHook(BeforeNodeHook hook) { beforeHook_ = std::move(hook); }
  const ir::Graph& graph() const { return *graph_; }

 private:
  static constexpr int kNoSlot = -1;

  struct Binding {
    const ir::Value* value;
    int slot;  // kNoSlot: checked but not used by any node
  };
  struct Step {
    const ir::Node* node;
    KernelFn kernel;
    std::vector<int> operands;  // slots, in operand order
    std::vector<int> results;   // slots, in result order; kNoSlot: dropped at once (unused)
    std::vector<int> release;   // slots whose last use is this node
  };
  struct OutputBinding {
    std::string name;
    int slot;
  };

  explicit Executor(const ir::Graph& graph) : graph_(&graph) {}

  const ir::Graph* graph_;
  std::vector<Binding> inputs_;
  std::vector<Binding> params_;
  std::vector<Step> steps_;
  std::vector<OutputBinding> outputs_;
  int numSlots_ = 0;
  NodeHook hook_;
  BeforeNodeHook beforeHook_;
};

// "f32[4, 8]" for a tensor (its ATen dtype name if it has no IR dtype).
std::string describeTensor(const at::Tensor& tensor);

// Ok when the kernel's results are exactly the node's IR results (count, dtype, shape) and,
// for ops that are not views (OpInfo::view), fresh: contiguous and sharing no storage with the
// operands -- the memory planner's model (passes/liveness.h). Otherwise an Error naming the
// node. The executor runs it after every node: a mismatch is a kernel bug, and catching it at
// the node saves a long hunt downstream.
Status checkResults(const ir::Node& node, std::span<const at::Tensor> results,
                    std::span<const at::Tensor> operands = {});

// Runs one op eagerly on tensors: infers the result types from the operand types and
// attributes (errors as for graph building), runs the kernel and checks its results. For
// tests, debugging and tools; graphs should go through Executor.
Expected<std::vector<at::Tensor>> callOp(std::string_view opName, std::span<const at::Tensor> operands,
                                         const ir::AttrMap& attrs = {}, const RunContext& ctx = {});

}  // namespace gradc::runtime
