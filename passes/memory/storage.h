// The storage model: which value owns each value's storage, the strides every value has, the
// workspace each node holds while it runs, and what each buffer holds and how long it stays
// resident. Order independent: computed once per graph, read by the liveness sweep
// (passes/memory/lifetimes.h), the step graph and the peak bound. Part of the one memory model
// (passes/memory/, docs/memory.md).
//
// Model (it mirrors the executor and the ATen kernels):
//  - Storage. Results of view ops (OpInfo::view) share their source's buffer. Every value has
//    static strides: params, inputs and results of non-view ops are contiguous (the kernels
//    guarantee it); view ops derive their strides as ATen does. `reshape` is a view exactly
//    when ATen's stride rule allows one (at::detail::computeStride); otherwise it copies into a
//    new buffer.
//  - Workspace, held during a node's step only: the op table's kernel workspace, plus the
//    hidden copies kernels make of strided operands they cannot read in place (a transposed
//    operand of a batched matmul whose batch dims do not fold, a strided input of layer_norm
//    or softmax, ...). How each kernel reads strided operands, and how each view op derives its
//    strides, are op-table properties (OpInfo::stridedReads, OpInfo::viewLayout), kept in step
//    with runtime/kernels/kernels_*.cpp.
//  - Roles. What a buffer holds (ir::BufferKind) and its residency (ir::Residency) come from
//    storageRoleOf, the one place that decides them: a persistent buffer is alive in every step
//    of every order; a step-scoped one from the node that makes it to its last reader.
//
// Complexity: O(nodes + uses + rank) time and space.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "ir/graph.h"
#include "ir/memory_plan.h"
#include "passes/id_index.h"

namespace gradc::passes {

using ir::BufferKind;
using ir::Residency;

// What the storage owned by a value holds, and how long it stays resident.
struct StorageRole {
  BufferKind kind = BufferKind::Activation;
  Residency residency = Residency::Step;
};
// `owner` owns its storage (not a view). Parameters (BufferKind::Param, or OptState for a
// parameter with role opt_state) and inputs are persistent, as ir::defaultResidency says of
// their kinds; results are step-scoped, their kind from the producing node's phase.
// Producer-less values are persistent by this rule; a step-scoped parameter would be the result
// of the node that brings it in (a gather, a load), not a parameter.
StorageRole storageRoleOf(const ir::Value& owner);
// The graph's persistent values, parameters then inputs, in declaration order: alive at every
// step of every order of every rewrite of the graph.
std::vector<const ir::Value*> persistentValues(const ir::Graph& graph);

// Order-independent storage facts: which value owns each value's storage, strides, and the
// workspace each node holds while it runs.
class StorageModel {
 public:
  // The value whose buffer `v` lives in: v itself unless v is a view.
  const ir::Value* owner(const ir::Value* v) const { return info(v).owner; }
  bool isView(const ir::Value* v) const { return owner(v) != v; }
  // Strides in elements, as the runtime's tensor will have them.
  const std::vector<std::int64_t>& strides(const ir::Value* v) const { return info(v).strides; }
  bool contiguous(const ir::Value* v) const;
  // Op-table workspace plus hidden copies of strided operands, in bytes.
  std::int64_t workspaceBytes(const ir::Node* node) const;
  // The hidden-copy part of workspaceBytes alone.
  std::int64_t copyBytes(const ir::Node* node) const;

 private:
  friend StorageModel analyzeStorage(const ir::Graph& graph);
  struct Info {
    const ir::Value* owner;
    std::vector<std::int64_t> strides;
    const ir::Value* self = nullptr;  // the value described (ids are unique in one graph only)
  };
  struct NodeCost {
    std::int64_t workspace = 0;
    std::int64_t copies = 0;
  };
  const Info& info(const ir::Value* v) const {
    const int i = valueIndex_.get(v);
    if (i < 0 || info_[static_cast<size_t>(i)].self != v) throw std::out_of_range("storage model: a value of another graph");
    return info_[static_cast<size_t>(i)];
  }
  void add(const ir::Value* v, Info info) {
    info.self = v;
    if (valueIndex_.insert(v, static_cast<int>(info_.size()))) info_.push_back(std::move(info));
  }
  IdIndex<ir::Value> valueIndex_;  // value -> info_ index
  std::vector<Info> info_;
  IdIndex<ir::Node> nodeIndex_;  // node -> nodes_ index (nodes with workspace only)
  std::vector<NodeCost> nodes_;
};

StorageModel analyzeStorage(const ir::Graph& graph);

// Strides of `newShape` viewing a tensor of `shape` and `strides`, or nullopt when no view can
// express it (ATen's at::detail::computeStride; reshape then copies).
std::optional<std::vector<std::int64_t>> viewStrides(const ir::Shape& shape, const std::vector<std::int64_t>& strides,
                                                     const ir::Shape& newShape);
std::vector<std::int64_t> contiguousStrides(const ir::Shape& shape);

}  // namespace gradc::passes
