// Memory liveness of a scheduled graph: which buffers exist at each step of program order, and
// the peak. The common ground of the memory planner (offsets, plan dumps), the remat pass
// (does a plan fit the budget?) and the runtime's planned-vs-measured report.
//
// Model (it mirrors the executor): the graph runs in program order, one node per step.
// Parameters, optimizer state and graph inputs live for the whole step. A node's results are
// allocated when it runs, while its operands are still alive, and freed after the last step
// that uses them (graph outputs: at the end). During its step a node also holds its kernel
// workspace (op table). Results of view ops share their source's buffer (see OpInfo::view):
// a buffer lives until the last use of any value that aliases it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc::passes {

enum class BufferKind { Param, OptState, Input, Activation, Gradient, Optimizer, Recompute, Comm };
std::string_view bufferKindName(BufferKind kind);

struct Buffer {
  BufferKind kind;
  std::int64_t bytes = 0;
  int firstStep = 0;  // step (node index) that allocates it; 0 for params and inputs
  int lastStep = 0;   // last step at which it is alive (inclusive)
  const ir::Value* value = nullptr;  // the value that owns the storage (a param, input or result)
  std::vector<const ir::Value*> aliases;  // view results sharing the storage
};

struct Liveness {
  std::vector<Buffer> buffers;               // params and inputs first, then results in program order
  std::vector<std::int64_t> liveBytes;       // per step: bytes alive during that step, workspace included
  std::vector<std::int64_t> workspaceBytes;  // per step
  std::int64_t peakBytes = 0;
  int peakStep = 0;
  std::int64_t persistentBytes = 0;  // params + optimizer state + inputs (alive throughout)
};

Liveness analyzeLiveness(const ir::Graph& graph);

}  // namespace gradc::passes
