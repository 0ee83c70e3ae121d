#include "passes/graph_stats.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gradc::passes {

std::string specPattern(const std::string& specName) {
  std::string out;
  size_t start = 0;
  while (start <= specName.size()) {
    size_t end = specName.find('.', start);
    if (end == std::string::npos) end = specName.size();
    std::string part = specName.substr(start, end - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!out.empty() || start > 0) out += '.';
    out += digits ? "*" : part;
    start = end + 1;
  }
  return out;
}

GraphStats computeGraphStats(const ir::Graph& graph) {
  GraphStats s;
  s.nodes = static_cast<std::int64_t>(graph.numNodes());
  for (const auto& p : graph.params()) {
    if (ir::isLearned(*p)) {
      s.paramCount += p->type().numel();
      s.paramBytes += p->type().bytes();
      ++s.paramTensors;
    } else {
      s.stateCount += p->type().numel();
      s.stateBytes += p->type().bytes();
    }
  }
  for (const auto& in : graph.inputs()) s.inputBytes += in->type().bytes();

  using Key = std::tuple<std::string, std::string, std::string>;  // pattern, op, type
  std::map<Key, ActivationClass> classes;
  bool sawBackward = false;
  const ir::KernelSetting kernels = graph.kernelSetting();
  for (const auto& node : graph.nodes()) {
    std::int64_t flops = node->flops();
    std::int64_t workspace = node->workspaceBytes(kernels);
    if (workspace > s.maxWorkspaceBytes) {
      s.maxWorkspaceBytes = workspace;
      s.maxWorkspaceNode = node->specName() + " (" + std::string(node->opName()) + ")";
    }
    switch (node->phase()) {
      case ir::Phase::fwd: s.forwardFlops += flops; break;
      case ir::Phase::bwd:
      case ir::Phase::recompute:
        s.backwardFlops += flops;
        sawBackward = true;
        break;
      case ir::Phase::opt: s.optimizerFlops += flops; break;
      case ir::Phase::comm: break;
    }
    if (node->phase() != ir::Phase::fwd) continue;
    for (size_t r = 0; r < node->numResults(); ++r) {
      const ir::TensorType& type = node->result(r)->type();
      std::string op(node->opName());
      if (node->numResults() > 1) op += "#" + std::to_string(r);
      Key key{specPattern(node->specName()), op, ir::toString(type)};
      ActivationClass& c = classes[key];
      if (c.count == 0) {
        c.specPattern = std::get<0>(key);
        c.op = op;
        c.type = type;
      }
      ++c.count;
      s.activationBytes += type.bytes();
    }
  }
  if (!sawBackward) {
    s.backwardEstimated = true;
    s.backwardFlops = 2 * s.forwardFlops;
  }
  for (auto& [key, c] : classes) s.activationClasses.push_back(std::move(c));
  std::stable_sort(s.activationClasses.begin(), s.activationClasses.end(),
                   [](const ActivationClass& a, const ActivationClass& b) { return a.totalBytes() > b.totalBytes(); });
  return s;
}

}  // namespace gradc::passes
