// Memory liveness of a scheduled graph: which buffers exist at each step of program order, and
// the peak. The common ground of the memory planner (offsets, plan dumps), the schedule pass,
// the remat pass (does a plan fit the budget?) and the runtime's planned-vs-measured report.
//
// Model (it mirrors the executor and the ATen kernels; docs/memory.md has the details):
//  - The graph runs in program order, one node per step. Parameters, optimizer state and graph
//    inputs live for the whole step.
//  - A node's results are allocated when it runs, while its operands are still alive, and
//    freed after the last step that uses them (graph outputs: at the end; unused results: at
//    once).
//  - Storage. Results of view ops (OpInfo::view) share their source's buffer: a buffer lives
//    until the last use of any value that aliases it. Every value has static strides: params,
//    inputs and results of non-view ops are contiguous (the kernels guarantee it); view ops
//    derive their strides as ATen does. `reshape` is a view exactly when ATen's stride rule
//    allows one (at::detail::computeStride); otherwise it copies into a new buffer.
//  - Workspace, held during a node's step only: the op table's kernel workspace, plus the
//    hidden copies kernels make of strided operands they cannot read in place (a transposed
//    operand of a batched matmul whose batch dims do not fold, a strided input of layer_norm
//    or softmax, ...). How each kernel reads strided operands, and how each view op
//    derives its strides, are op-table properties (OpInfo::stridedReads, OpInfo::viewLayout),
//    kept in step with runtime/kernels_*.cpp.
//
// Complexity: O(nodes + uses + rank) time and space; the storage model (order independent) is
// computed once and can be reused for several orders (the schedule pass compares orders).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/memory_plan.h"
#include "passes/id_index.h"

namespace gradc::passes {

// A buffer's kind (ir/memory_plan.h); liveness gives every kind but Workspace (workspaces are
// per-step byte counts here, buffers only in the plan).
using ir::BufferKind;

struct Buffer {
  BufferKind kind;
  std::int64_t bytes = 0;
  int firstStep = 0;  // step (node index) that allocates it; 0 for params and inputs
  int lastStep = 0;   // last step at which it is alive (inclusive)
  const ir::Value* value = nullptr;  // the value that owns the storage (a param, input or result)
  std::vector<const ir::Value*> aliases;  // view results sharing the storage
};

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

struct Liveness {
  std::vector<Buffer> buffers;               // params and inputs first, then results in program order
  std::vector<std::int64_t> liveBytes;       // per step: bytes alive during that step, workspace included
  std::vector<std::int64_t> workspaceBytes;  // per step (op table workspace + hidden copies)
  std::vector<std::int64_t> copyBytes;       // per step: the hidden-copy part of workspaceBytes
  std::int64_t peakBytes = 0;
  int peakStep = 0;
  std::int64_t persistentBytes = 0;  // params + optimizer state + inputs (alive throughout)
  // Buffer index of every value that has storage (views map to their owner's buffer); -1: none.
  IdIndex<ir::Value> bufferOf;
};

// Liveness over the graph's program order.
Liveness analyzeLiveness(const ir::Graph& graph);
// Liveness over another order of the graph's nodes (a permutation of graph.nodes() that is a
// valid topological order), with a storage model computed before.
Liveness analyzeLiveness(const ir::Graph& graph, const StorageModel& storage, std::span<const ir::Node* const> order);

// Strides of `newShape` viewing a tensor of `shape` and `strides`, or nullopt when no view can
// express it (ATen's at::detail::computeStride; reshape then copies).
std::optional<std::vector<std::int64_t>> viewStrides(const ir::Shape& shape, const std::vector<std::int64_t>& strides,
                                                     const ir::Shape& newShape);
std::vector<std::int64_t> contiguousStrides(const ir::Shape& shape);

}  // namespace gradc::passes
