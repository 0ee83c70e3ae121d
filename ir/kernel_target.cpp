#include "ir/kernel_target.h"

#include <cassert>
#include <utility>

namespace gradc::ir {
namespace {

std::vector<const KernelTarget*>& registry() {
  static std::vector<const KernelTarget*> targets;
  return targets;
}

}  // namespace

KernelTarget::KernelTarget(KernelTargetInfo info) : info_(std::move(info)) {
  for (const WorkspaceRule& rule : info_.workspace) {
    const OpInfo* op = findOp(rule.op);
    assert(op && "a backend's workspace rule names an op of the op table");
    if (op) rules_.emplace(op, rule.bytes);
  }
}

CostFn KernelTarget::workspaceRule(const OpInfo& op) const {
  if (rules_.empty()) return nullptr;
  auto it = rules_.find(&op);
  return it == rules_.end() ? nullptr : it->second;
}

const KernelTarget& portableKernelTarget() {
  static const KernelTarget portable({.name = "portable", .communicator = "", .ranks = "ranks",
                                      .kernelFormat = KernelFormat::none});
  return portable;
}

void registerKernelTarget(const KernelTarget& target) {
  assert(!findKernelTarget(target.name()) && "each backend is registered once");
  if (!findKernelTarget(target.name())) registry().push_back(&target);
}

const KernelTarget* findKernelTarget(std::string_view name) {
  for (const KernelTarget* t : registry())
    if (t->name() == name) return t;
  return nullptr;
}

std::span<const KernelTarget* const> kernelTargets() { return registry(); }

std::string kernelTargetNames() {
  std::string out;
  for (const KernelTarget* t : registry()) out += (out.empty() ? "" : ", ") + std::string(t->name());
  return out;
}

const KernelTarget& defaultKernelTarget() {
  const KernelTarget* host = findKernelTarget("cpu");
  return host ? *host : portableKernelTarget();
}

}  // namespace gradc::ir
