// Static statistics of a graph for `gradc compile --emit summary`: parameter count, FLOPs,
// and activation bytes grouped into classes.
//
// An activation class groups forward results that play the same role across repeated
// blocks: same op, result index, type and spec name once every all-digit path component is
// replaced by '*' ("blocks.*.attn"). Classes are sorted by total bytes, largest first, so the
// tensors that dominate memory are named at the top.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc::passes {

struct ActivationClass {
  std::string specPattern;  // "blocks.*.mlp.fc1"
  std::string op;           // "linear", or "layer_norm#1" for result 1 of a multi-result op
  ir::TensorType type;
  std::int64_t count = 0;  // tensors in the class
  std::int64_t totalBytes() const { return count * type.bytes(); }
};

struct GraphStats {
  std::int64_t nodes = 0;
  std::int64_t paramCount = 0;  // elements of the learned parameters (ir::isLearned)
  std::int64_t paramBytes = 0;
  std::int64_t paramTensors = 0;
  std::int64_t stateCount = 0;  // elements of the other parameters: running statistics, optimizer state
  std::int64_t stateBytes = 0;
  std::int64_t inputBytes = 0;
  std::int64_t forwardFlops = 0;
  std::int64_t backwardFlops = 0;   // of bwd/recompute nodes, or the estimate below
  std::int64_t optimizerFlops = 0;  // of opt nodes
  bool backwardEstimated = false;   // no bwd nodes yet: backward counted as 2x forward
  std::int64_t activationBytes = 0;  // all forward results
  std::vector<ActivationClass> activationClasses;
  std::int64_t maxWorkspaceBytes = 0;
  std::string maxWorkspaceNode;  // spec name of the op with the largest kernel workspace

  std::int64_t trainingStepFlops() const { return forwardFlops + backwardFlops + optimizerFlops; }
};

GraphStats computeGraphStats(const ir::Graph& graph);

// "blocks.3.attn" -> "blocks.*.attn".
std::string specPattern(const std::string& specName);

}  // namespace gradc::passes
