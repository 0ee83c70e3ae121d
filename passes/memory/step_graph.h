// StepGraph: a training step's dependence and storage facts over dense indices -- all that the
// schedule pass (passes/schedule.h), the liveness sweep (passes/memory/lifetimes.h) and the peak
// lower bound (passes/memory/peak_bound.h) read -- built from a graph, or from a graph and a
// rewrite plan (passes/memory/rewrite_plan.h) without creating a node. The remat planner
// measures each proposal on one of these instead of rewriting the IR and undoing the rewrite
// (one set of flat arrays per proposal, no per-node allocation).
//
// Model: the storage model's (passes/memory/storage.h). A storage group is a step-scoped result
// that owns its storage (views join their owner's group, operand 0's); persistent values
// (storageRoleOf: parameters, optimizer state, inputs) have no group and are counted in
// persistentBytes. A node allocates the groups it owns when it runs; a group is freed after
// the last node that reads it through any alias; groups of graph outputs (pinned) live to the
// end.
//
// Two steps:
//   StepFacts (once per graph and loss chunking): what does not change when recompute is
//     inserted: per node its flags, workspace (op table + hidden copies: a clone reads operands
//     with the strides of the original's, so it has the same workspace), collective seq, the
//     written parameters it touches; per value whether it owns storage or views operand 0's.
//   buildStepGraph(facts, plan): the lists of the graph, or of the graph as
//     remat::applyRewrite(graph, plan) would make it (clones right before the node at their
//     `before` position, in creation order; rewired operands), in O(nodes + operands).
//
// Invariants (tests/passes/step_graph_test.cpp checks them on bundled models, random DAGs and
// every proposal of every strategy):
//   - buildStepGraph(StepFacts(g), &plan) equals buildStepGraph(StepFacts(applyRewrite(g, plan)))
//     field by field;
//   - analyzeLiveness (passes/memory/liveness.h) is the sweep over buildStepGraph(StepFacts(g)),
//     so the plan's buffers and every peak the planners compare come from one model;
//   - groups are numbered in node order: node i owns groups [groupStart[i], groupStart[i+1]).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/memory/adjacency.h"
#include "passes/memory/storage.h"

namespace gradc::passes {

struct RewritePlan;

enum StepFlag : std::uint8_t {
  kStepRecompute = 1,          // phase recompute (a clone, or a node the graph already recomputes)
  kStepSideEffects = 2,        // OpInfo::sideEffects (updates parameters in place)
  kStepIssuesCollective = 4,   // OpInfo::issuesCollective
  kStepReduceScatterWait = 8,  // the wait of a reduce-scatter
  kStepAllFresh = 16,          // has results, and none is a view
};

class StepFacts {
 public:
  StepFacts(const ir::Graph& graph, const StorageModel& storage);

  size_t numNodes() const { return nodes_.size(); }
  // Parameters, optimizer state and inputs: live in every order of every rewrite of the graph,
  // so no plan of it peaks below this.
  std::int64_t persistentBytes() const { return persistentBytes_; }

 private:
  friend class StepGraphBuilder;
  enum class Storage : std::uint8_t { Persistent, Owns, View };
  const ir::Graph* graph_;
  std::vector<const ir::Node*> nodes_;  // program order
  std::vector<int> nodeIndex_;          // by node id
  std::vector<std::uint8_t> flags_;
  std::vector<std::int64_t> workspace_;
  std::vector<std::int64_t> seq_;  // collectives' seq attribute
  std::vector<Storage> storage_;   // by value id
  std::vector<std::int64_t> bytes_;  // by value id: the bytes of a value that owns storage
  std::vector<int> producer_;        // by value id: the producing node's index, -1 for inputs and params
  Lists operands_;  // per node: its operands' value ids, in order
  Lists results_;   // per node: its results' value ids, in order
  Lists paramsWritten_;  // per node: distinct Param operands of a side-effect node (param index)
  Lists paramsTouched_;  // per node: distinct written params that own some operand's storage
  std::vector<int> outputs_;  // value ids of the graph outputs
  size_t numParams_ = 0;
  std::int64_t persistentBytes_ = 0;
};

struct StepGraph {
  std::vector<const ir::Node*> nodes;  // program order; for a clone, the node it copies
  std::vector<std::uint8_t> flags;     // StepFlag bits
  std::vector<std::int64_t> workspace;
  std::vector<std::int64_t> fresh;  // bytes of the groups the node owns whose value is used
  Lists producers;   // per node: distinct producers of its operands, in operand order
  Lists users;       // per node: distinct nodes reading its results, ascending
  Lists groupsRead;  // per node: distinct groups among its operands, in operand order
  Lists groupUsers;  // per group: distinct nodes reading it, ascending
  std::vector<int> groupStart;  // node i owns groups [groupStart[i], groupStart[i + 1])
  std::vector<int> groupProducer;
  std::vector<std::int64_t> groupBytes;
  std::vector<char> groupPinned;  // a graph output's storage: never freed
  // By value id of the facts' graph: the group holding an original value's storage (its own,
  // or for a view its source's); -1 for parameters, inputs and values no node makes.
  std::vector<int> valueGroup;
  // Order edges (from, to): in-place updates against every other node touching the parameter,
  // collectives in seq order, reduce-scatter waits after the collective issued before them
  // (passes/schedule.h). An edge repeated for several parameters appears once per parameter.
  std::vector<std::pair<int, int>> orderEdges;
  std::int64_t persistentBytes = 0;

  size_t size() const { return nodes.size(); }
  bool has(int node, StepFlag flag) const { return (flags[static_cast<size_t>(node)] & flag) != 0; }
};

// The step graph of the facts' graph, or (plan != nullptr) of the graph that
// applying the plan (remat::applyRewrite) would make, without touching the graph.
StepGraph buildStepGraph(const StepFacts& facts, const RewritePlan* plan = nullptr);

}  // namespace gradc::passes
