#include "ir/kernel_target.h"

#include <atomic>
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
  const std::span<const OpInfo> ops = allOps();
  for (const WorkspaceRule& rule : info_.workspace) {
    const OpInfo* op = findOp(rule.op);
    assert(op && "a backend's workspace rule names an op of the op table");
    if (!op) continue;
    if (rules_.empty()) rules_.assign(ops.size(), nullptr);
    rules_[static_cast<size_t>(op - ops.data())] = rule.bytes;
  }
}

CostFn KernelTarget::workspaceRule(const OpInfo& op) const {
  if (rules_.empty()) return nullptr;
  const std::span<const OpInfo> ops = allOps();
  if (&op < ops.data() || &op >= ops.data() + ops.size()) return nullptr;  // not the table's entry
  return rules_[static_cast<size_t>(&op - ops.data())];
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
  // Registration happens once, first thing in a process: the host's row, once there, stays.
  static std::atomic<const KernelTarget*> host{nullptr};
  const KernelTarget* found = host.load(std::memory_order_relaxed);
  if (!found) {
    found = findKernelTarget("cpu");
    host.store(found, std::memory_order_relaxed);
  }
  return found ? *found : portableKernelTarget();
}

CostFn workspaceRuleFor(const OpInfo& op, KernelSetting kernels) {
  const KernelTarget& target = kernels.target ? *kernels.target : defaultKernelTarget();
  const CostFn own = target.workspaceRule(op);
  return own ? own : op.workspaceBytes;
}

}  // namespace gradc::ir
