#include "passes/liveness.h"

#include <algorithm>
#include <unordered_map>

namespace gradc::passes {

std::string_view bufferKindName(BufferKind kind) {
  switch (kind) {
    case BufferKind::Param: return "param";
    case BufferKind::OptState: return "opt_state";
    case BufferKind::Input: return "input";
    case BufferKind::Activation: return "activation";
    case BufferKind::Gradient: return "grad";
    case BufferKind::Optimizer: return "optimizer";
    case BufferKind::Recompute: return "recompute";
    case BufferKind::Comm: return "comm";
  }
  return "?";
}

namespace {
BufferKind kindOfResult(const ir::Node& node) {
  switch (node.phase()) {
    case ir::Phase::fwd: return BufferKind::Activation;
    case ir::Phase::bwd: return BufferKind::Gradient;
    case ir::Phase::opt: return BufferKind::Optimizer;
    case ir::Phase::recompute: return BufferKind::Recompute;
    case ir::Phase::comm: return BufferKind::Comm;
  }
  return BufferKind::Activation;
}
}  // namespace

Liveness analyzeLiveness(const ir::Graph& graph) {
  Liveness l;
  const int steps = static_cast<int>(graph.numNodes());
  const int last = std::max(steps - 1, 0);
  std::unordered_map<const ir::Value*, size_t> bufferOf;
  auto persistent = [&](const ir::Value* v, BufferKind kind) {
    bufferOf.emplace(v, l.buffers.size());
    l.buffers.push_back(Buffer{kind, v->type().bytes(), 0, last, v, {}});
    l.persistentBytes += v->type().bytes();
  };
  for (const auto& p : graph.params())
    persistent(p.get(), ir::getString(p->attrs(), "role").value_or("") == "opt_state" ? BufferKind::OptState
                                                                                       : BufferKind::Param);
  for (const auto& in : graph.inputs()) persistent(in.get(), BufferKind::Input);

  l.workspaceBytes.assign(static_cast<size_t>(steps), 0);
  for (int i = 0; i < steps; ++i) {
    const ir::Node& node = *graph.nodes()[static_cast<size_t>(i)];
    l.workspaceBytes[static_cast<size_t>(i)] = node.workspaceBytes();
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* v = node.result(r);
      if (node.op().view && node.numOperands() > 0) {
        size_t source = bufferOf.at(node.operand(0));
        bufferOf.emplace(v, source);
        l.buffers[source].aliases.push_back(v);
        continue;
      }
      bufferOf.emplace(v, l.buffers.size());
      l.buffers.push_back(Buffer{kindOfResult(node), v->type().bytes(), i, i, v, {}});
    }
    for (const ir::Value* operand : node.operands()) {
      Buffer& b = l.buffers[bufferOf.at(operand)];
      b.lastStep = std::max(b.lastStep, i);
    }
  }
  for (const ir::GraphOutput& out : graph.outputs()) l.buffers[bufferOf.at(out.value)].lastStep = last;

  // Difference array over steps: +bytes at firstStep, -bytes after lastStep.
  std::vector<std::int64_t> delta(static_cast<size_t>(steps) + 1, 0);
  for (const Buffer& b : l.buffers) {
    delta[static_cast<size_t>(b.firstStep)] += b.bytes;
    delta[static_cast<size_t>(b.lastStep) + 1] -= b.bytes;
  }
  l.liveBytes.assign(static_cast<size_t>(steps), 0);
  std::int64_t running = 0;
  l.peakBytes = l.persistentBytes;
  for (int i = 0; i < steps; ++i) {
    running += delta[static_cast<size_t>(i)];
    l.liveBytes[static_cast<size_t>(i)] = running + l.workspaceBytes[static_cast<size_t>(i)];
    if (l.liveBytes[static_cast<size_t>(i)] > l.peakBytes) {
      l.peakBytes = l.liveBytes[static_cast<size_t>(i)];
      l.peakStep = i;
    }
  }
  return l;
}

}  // namespace gradc::passes
