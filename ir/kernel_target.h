// What the compiler knows of a backend: one description per kind of device (the --device value),
// read by the planner and by the runtime alike, so a plan and the kernels that run it agree.
//
// A description says:
//   - its name ("cpu", "cuda", ...), the graph attribute kernel_target of plans made for it;
//   - the workspace rule of each op whose kernel there allocates differently from the portable
//     ATen kernel, whose rule is the op table's (OpInfo::workspaceBytes): the host's products on
//     oneDNN or in widened panels, its convolutions' blocked copies, its tiled attention; CUDA's
//     fused attention;
//   - its communicator, and which dtypes it can sum (Gloo: no bf16; NCCL: bf16 too);
//   - the format of the generated kernels it loads from an artifact;
//   - the memory its libraries hold beside a plan for the whole run (--device-reserve NAME).
//
// The descriptions live in their backends' folders (runtime/<backend>/, built without LibTorch
// into gradc_kernel_targets) and are registered once per process (registerKernelTargets(),
// runtime/backends/kernel_targets.h); ir/ itself knows only this interface and the portable description,
// which has no rule of its own (what a process that registered none plans with).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/op_table.h"

namespace gradc::ir {

// The format of the generated kernels a backend loads (the artifact holds each): the host's
// shared object, a GPU's PTX, or none (the backend runs the artifact's unfused reference step).
enum class KernelFormat : std::uint8_t { none, sharedObject, ptx };

// One op whose kernel on the backend has a workspace of its own.
struct WorkspaceRule {
  std::string_view op;  // the op table's name
  CostFn bytes;         // sees the node's operand types, attributes and plan threads, and its results
};

struct KernelTargetInfo {
  std::string_view name;          // the --device value and the plans' kernel_target
  std::string_view communicator;  // the library its ranks sum through ("Gloo", "NCCL")
  std::string_view ranks;         // what its ranks are, for messages ("CPU ranks", "GPU ranks")
  // Whether its communicator can sum tensors of `dtype` (gradient all-reduces, loss sums).
  bool (*sums)(DType dtype) = nullptr;
  KernelFormat kernelFormat = KernelFormat::sharedObject;
  // Bytes its libraries hold beside a plan for the whole run (a plan's reserve, --device-reserve).
  std::int64_t libraryReserveBytes = 0;
  std::vector<WorkspaceRule> workspace;
};

class KernelTarget {
 public:
  explicit KernelTarget(KernelTargetInfo info);

  std::string_view name() const { return info_.name; }
  std::string_view communicator() const { return info_.communicator; }
  std::string_view ranks() const { return info_.ranks; }
  bool sums(DType dtype) const { return info_.sums ? info_.sums(dtype) : true; }
  KernelFormat kernelFormat() const { return info_.kernelFormat; }
  std::int64_t libraryReserveBytes() const { return info_.libraryReserveBytes; }
  // The backend's rule for `op`, nullptr where the op table's (the portable kernel's) applies.
  CostFn workspaceRule(const OpInfo& op) const;
  // The ops it has rules for, in its description's order.
  std::span<const WorkspaceRule> workspaceRules() const { return info_.workspace; }

 private:
  KernelTargetInfo info_;
  std::vector<CostFn> rules_;  // by the op's index in allOps(); empty without rules
};

// The description with no rules of its own: the op table's (portable ATen kernels).
const KernelTarget& portableKernelTarget();

// Registers a backend's description (its name must be new); the process keeps the reference.
void registerKernelTarget(const KernelTarget& target);
// The description of that name, nullptr when none is registered.
const KernelTarget* findKernelTarget(std::string_view name);
// Every registered description, in registration order.
std::span<const KernelTarget* const> kernelTargets();
// "cpu, cuda, ...", for messages.
std::string kernelTargetNames();

// What plans are made for when they name no target: the registered "cpu", else the portable.
const KernelTarget& defaultKernelTarget();

// The workspace rule a node of `op` has under `kernels`: its backend's (defaultKernelTarget()
// when it names none) where there is one, else the op table's; nullptr when neither has one.
CostFn workspaceRuleFor(const OpInfo& op, KernelSetting kernels);

}  // namespace gradc::ir
