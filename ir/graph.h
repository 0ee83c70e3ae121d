// The gradc IR: a Graph of Nodes in program order, in SSA form.
//
// Values are defined once: by a graph input (data fed each step), a parameter (trained
// weights, named as in the spec: "blocks.0.attn.qkv.weight"), or a node result. Every Value
// keeps its uses, so rewrites are O(uses). Nodes are kept in a vector in program order, which
// is also the execution order once the schedule pass has run.
//
// Invariants (checked by ir::verify): every operand is defined before its use and belongs to
// this graph; use lists mirror operands exactly; result types equal what the op table infers;
// attributes match the op's schema; input, parameter and output names are unique.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_table.h"
#include "ir/status.h"
#include "ir/tensor_type.h"

namespace gradc::ir {

class Node;
class Graph;

// Which part of a training step a node belongs to. Set by the pass that creates the node.
enum class Phase : std::uint8_t { fwd, bwd, opt, recompute, comm };
std::string_view phaseName(Phase phase);
std::optional<Phase> parsePhase(std::string_view name);

enum class ValueKind : std::uint8_t { Input, Param, Result };

struct Use {
  Node* user;
  unsigned operandIndex;
  friend bool operator==(const Use&, const Use&) = default;
};

class Value {
 public:
  ValueKind kind() const { return kind_; }
  const TensorType& type() const { return type_; }
  // Inputs and parameters have a name; results have none (the printer numbers them).
  const std::string& name() const { return name_; }
  Node* producer() const { return producer_; }
  unsigned resultIndex() const { return resultIndex_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty() || graphOutputRefs_ > 0; }
  bool isGraphOutput() const { return graphOutputRefs_ > 0; }
  // Parameter attributes: initialiser ("init" = "uniform" | "normal" | "ones" | "zeros", with
  // "bound" or "std"), and anything later passes attach. Input attributes: "batched" = false
  // for an input that is not a batch of examples (isBatchedInput).
  const AttrMap& attrs() const { return attrs_; }
  AttrMap& attrs() { return attrs_; }
  // An input whose leading axis is the batch: split by micro-batching and data parallelism, fed
  // to each rank as its shard. False for inputs marked {batched = false}: the same tensor for
  // every example, micro-batch and rank.
  bool isBatchedInput() const;
  // Dense number of this value in its graph, below Graph::valueIdBound(): analyses index
  // arrays by it instead of hashing pointers. Unique among the graph's live values; the ids of
  // the newest values are reused after they are erased.
  std::uint32_t id() const { return id_; }

 private:
  friend class Graph;
  friend class Node;
  Value(ValueKind kind, TensorType type, std::string name, Node* producer, unsigned resultIndex)
      : kind_(kind), type_(std::move(type)), name_(std::move(name)), producer_(producer), resultIndex_(resultIndex) {}

  ValueKind kind_;
  TensorType type_;
  std::string name_;
  Node* producer_;
  unsigned resultIndex_;
  std::vector<Use> uses_;
  int graphOutputRefs_ = 0;
  std::uint32_t id_ = 0;
  AttrMap attrs_;
};

class Node {
 public:
  ~Node();
  const OpInfo& op() const { return *op_; }
  std::string_view opName() const { return op_->name; }

  std::span<Value* const> operands() const { return operands_; }
  Value* operand(size_t i) const { return operands_.at(i); }
  size_t numOperands() const { return operands_.size(); }
  void setOperand(size_t i, Value* value);

  size_t numResults() const { return results_.size(); }
  Value* result(size_t i = 0) const { return results_.at(i).get(); }
  std::vector<TensorType> operandTypes() const;
  std::vector<TensorType> resultTypes() const;

  const AttrMap& attrs() const { return attrs_; }
  AttrMap& attrs() { return attrs_; }
  Phase phase() const { return phase_; }
  void setPhase(Phase phase) { phase_ = phase; }
  // The spec layer this node came from, "blocks.0.attn"; shown in IR text and plans.
  const std::string& specName() const { return specName_; }
  void setSpecName(std::string name) { specName_ = std::move(name); }

  std::int64_t flops() const;
  // Bytes the kernel allocates beyond its results, run with the given intra-op threads on the
  // given device kind (its graph's kernelSetting(); an int: that many threads on the host).
  std::int64_t workspaceBytes(KernelSetting kernels) const;
  // Dense number of this node in its graph, below Graph::nodeIdBound() (as Value::id()).
  std::uint32_t id() const { return id_; }

 private:
  friend class Graph;
  Node(const OpInfo* op, AttrMap attrs, Phase phase, std::string specName)
      : op_(op), attrs_(std::move(attrs)), phase_(phase), specName_(std::move(specName)) {}
  void dropOperandUses();

  const OpInfo* op_;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  AttrMap attrs_;
  Phase phase_;
  std::string specName_;
  std::uint32_t id_ = 0;
};

// A learned parameter: one that gets a gradient and an optimizer update. Every parameter is,
// except optimizer state (attribute role = "opt_state", passes/optimizer.h) and running
// statistics (role = "running_stat": batch_norm's running mean and variance and its batch
// counter, which the forward updates in place; PyTorch's buffers).
bool isLearned(const Value& param);

struct GraphOutput {
  std::string name;  // "loss", "grad.fc1.weight", ...
  Value* value;
};

class Graph {
 public:
  explicit Graph(std::string name = "main") : name_(std::move(name)) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&& other) noexcept;
  ~Graph();

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  // Graph-wide attributes: "seed", "model", ...
  const AttrMap& attrs() const { return attrs_; }
  AttrMap& attrs() { return attrs_; }
  // Intra-op threads the graph's kernels run with, a parameter of its plan: kernels that keep
  // per-thread partial results (layer_norm_backward's weight and bias gradients) need
  // workspace in proportion. The graph attribute "kernel_threads"; a graph without it is
  // planned for 1 (`--emit ir` and `--emit plan` do not set it). Passes derive graphs with
  // their source's attributes, so it is set once, on the graph a build starts from.
  int kernelThreads() const;
  void setKernelThreads(int threads);
  // The backend whose kernels run the graph, also a parameter of its plan (its kernels may
  // allocate differently from the portable ones: ir/kernel_target.h). The graph attribute
  // "kernel_target" ("cuda"); a graph without it is planned for defaultKernelTarget() ("cpu").
  const KernelTarget& kernelTarget() const;
  void setKernelTarget(const KernelTarget& target);
  KernelSetting kernelSetting() const { return {kernelThreads(), &kernelTarget()}; }

  Value* addInput(std::string name, TensorType type);
  Value* addParam(std::string name, TensorType type, AttrMap attrs = {});
  std::span<const std::unique_ptr<Value>> inputs() const { return inputs_; }
  std::span<const std::unique_ptr<Value>> params() const { return params_; }
  // Input or parameter by name; nullptr if none.
  Value* findNamed(std::string_view name) const;

  // Creates a node at the insertion point (default: the end), inferring result types from the
  // op table. Fails (and changes nothing) when operands or attributes do not fit the op.
  Expected<Node*> create(const OpInfo& op, std::span<Value* const> operands, AttrMap attrs = {},
                         Phase phase = Phase::fwd, std::string specName = {});
  Expected<Node*> create(std::string_view opName, std::span<Value* const> operands, AttrMap attrs = {},
                         Phase phase = Phase::fwd, std::string specName = {});
  // Creates a node with the given result types, without inference (used by the parser; the
  // verifier checks the types afterwards).
  Node* createUnchecked(const OpInfo& op, std::span<Value* const> operands, AttrMap attrs,
                        std::vector<TensorType> resultTypes, Phase phase, std::string specName);

  // New nodes go before `node` (nullptr: at the end).
  void setInsertionPoint(Node* beforeNode) { insertBefore_ = beforeNode; }

  std::span<const std::unique_ptr<Node>> nodes() const { return nodes_; }
  size_t numNodes() const { return nodes_.size(); }
  // Every live value's id() is below valueIdBound(), every node's below nodeIdBound().
  size_t valueIdBound() const { return nextValueId_; }
  size_t nodeIdBound() const { return nextNodeId_; }
  // Position of a node in program order (O(n)); nullopt if not in this graph.
  std::optional<size_t> indexOf(const Node* node) const;

  // Removes a node whose results have no uses.
  void erase(Node* node);
  // Removes every node for which `dead` is true (results must be unused by surviving nodes).
  template <class Pred>
  size_t eraseIf(Pred dead);
  // Reorders nodes; `order` must be a permutation of nodes().
  void reorder(const std::vector<Node*>& order);

  void replaceAllUsesWith(Value* from, Value* to);
  // Removes every parameter for which `dead` is true; such parameters must have no uses.
  template <class Pred>
  size_t eraseParamsIf(Pred dead);

  // Adds an output, or rebinds the output of that name (O(1)).
  void setOutput(std::string name, Value* value);
  // Removes the output of that name; false if there is none.
  bool removeOutput(std::string_view name);
  // Removes every output for which `gone` is true, keeping the others' order (one pass: use this
  // rather than removeOutput in a loop).
  template <class Pred>
  size_t removeOutputsIf(Pred gone);
  std::span<const GraphOutput> outputs() const { return outputs_; }
  Value* findOutput(std::string_view name) const;

 private:
  void eraseNodeAt(size_t index);
  void releaseNodes();
  void reindexOutputs();
  // After an erasure: the next ids follow the highest live ones (recompute clones, created
  // last and erased together, give their ids back).
  void shrinkIds();

  // Transparent hashing, so findOutput(string_view) allocates nothing.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::string name_;
  AttrMap attrs_;
  std::vector<std::unique_ptr<Value>> inputs_;
  std::vector<std::unique_ptr<Value>> params_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<GraphOutput> outputs_;
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> outputIndex_;  // name -> position
  Node* insertBefore_ = nullptr;
  std::uint32_t nextValueId_ = 0;
  std::uint32_t nextNodeId_ = 0;
};

template <class Pred>
size_t Graph::eraseIf(Pred dead) {
  size_t before = nodes_.size();
  std::vector<std::unique_ptr<Node>> kept, gone;
  kept.reserve(nodes_.size());
  for (auto& n : nodes_) {
    if (dead(*n)) {
      if (insertBefore_ == n.get()) insertBefore_ = nullptr;
      gone.push_back(std::move(n));
    } else {
      kept.push_back(std::move(n));
    }
  }
  // Newest first: their uses sit at the back of the use lists (O(1) each, see dropOperandUses).
  for (auto it = gone.rbegin(); it != gone.rend(); ++it) (*it)->dropOperandUses();
  nodes_ = std::move(kept);
  if (!gone.empty()) shrinkIds();
  return before - nodes_.size();
}

template <class Pred>
size_t Graph::removeOutputsIf(Pred gone) {
  const size_t before = outputs_.size();
  std::erase_if(outputs_, [&](const GraphOutput& o) {
    if (!gone(o)) return false;
    --o.value->graphOutputRefs_;
    return true;
  });
  if (outputs_.size() != before) reindexOutputs();
  return before - outputs_.size();
}

template <class Pred>
size_t Graph::eraseParamsIf(Pred dead) {
  const size_t before = params_.size();
  std::erase_if(params_, [&](const std::unique_ptr<Value>& p) {
    const bool gone = dead(*p);
    assert(!gone || !p->hasUses());
    return gone;
  });
  return before - params_.size();
}

}  // namespace gradc::ir
