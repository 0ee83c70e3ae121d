// The memory plan as data: every buffer a step holds on a device -- its kind, the memory space
// it lives in, whether it is resident for the whole run or only between two steps of the
// schedule, its offset in that space's arena -- the schedule's steps and the live bytes per step.
// The compiler's memory planner fills it (passes/memory/memory_plan.h), the artifact stores it as JSON
// with the one codec (runtime/exec/plan_json.h: `gradc compile --emit plan`, `gradc inspect`, the
// runtime's loader), and the runtime executes it as written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gradc::ir {

// What a buffer holds. Its JSON name is bufferKindName's.
enum class BufferKind : std::uint8_t {
  Param,       // "param"
  OptState,    // "opt_state": optimizer state (moments, momentum)
  Input,       // "input"
  Activation,  // "activation": a forward result
  Gradient,    // "grad"
  Optimizer,   // "optimizer": the update's temporaries
  Recompute,   // "recompute": a recomputed forward result
  Comm,        // "comm": a collective's buffers
  Workspace,   // "workspace": a kernel's temporaries, alive during its step only
};
std::string_view bufferKindName(BufferKind kind);
std::optional<BufferKind> parseBufferKind(std::string_view name);

// Where a buffer lives; each space has its own arena. One today: the device's.
enum class MemorySpace : std::uint8_t { Device };
std::string_view memorySpaceName(MemorySpace space);
std::optional<MemorySpace> parseMemorySpace(std::string_view name);

// How long a buffer holds its bytes. Persistent: for the whole run, placed once, kept between
// steps (parameters, optimizer state, the inputs' slots today); Step: from its first to its last
// step of the schedule, its bytes reused by others outside that interval.
enum class Residency : std::uint8_t { Persistent, Step };
std::string_view residencyName(Residency residency);
std::optional<Residency> parseResidency(std::string_view name);
// The residency of a buffer of each kind unless its storage says otherwise (passes/memory/storage.h).
Residency defaultResidency(BufferKind kind);

struct PlannedBuffer {
  std::string name;      // as printed in IR: "%12", "%wte.weight"; workspaces: "workspace(%12)"
  std::string specName;  // the spec layer ("blocks.0.attn"); a parameter's layer; an input's name
  BufferKind kind = BufferKind::Activation;
  MemorySpace space = MemorySpace::Device;
  Residency residency = Residency::Step;
  std::string type;       // "f32[16, 128, 256]"; empty for workspaces
  std::int64_t size = 0;  // bytes
  std::int64_t offset = 0;  // from the base of its space's arena
  int firstStep = 0;        // inclusive; steps are the graph's nodes in schedule order
  int lastStep = 0;         // inclusive
  std::string producer;     // op of the producing node; empty for parameters and inputs

  bool persistent() const { return residency == Residency::Persistent; }
  // A kernel's temporaries: served beside the arena by the runtime's tracked allocator.
  bool workspace() const { return kind == BufferKind::Workspace; }
};

// What runs at one step of the schedule.
struct PlannedStep {
  std::string op;
  std::string phase;
  std::string specName;
};

// A buffer of a rank's plan alive at that rank's peak (the per-rank view of a plan).
struct RankBuffer {
  std::string name;
  BufferKind kind = BufferKind::Activation;
  std::string type;
  std::int64_t size = 0;
};

struct RankPlan {
  int rank = 0;
  std::int64_t peakBytes = 0;
  std::int64_t arenaBytes = 0;
  std::vector<RankBuffer> largestAtPeak;  // largest first; empty for a single-device plan
};

struct MemoryPlan {
  std::string model;
  std::optional<std::int64_t> budgetBytes;
  // Device memory reserved beside the plan for the device's libraries: peakBytes +
  // reserveBytes fits budgetBytes.
  std::int64_t reserveBytes = 0;
  std::string strategy = "none";  // the recompute strategy that produced the graph
  std::int64_t peakBytes = 0;
  int peakStep = 0;
  std::int64_t arenaBytes = 0;  // of the device space's arena
  std::int64_t persistentBytes = 0;
  std::int64_t forwardFlops = 0;
  std::int64_t backwardFlops = 0;
  std::int64_t optimizerFlops = 0;
  std::int64_t recomputeFlops = 0;
  int lossChunks = 0;  // the fused LM-head loss's chunk count; 0: not fused
  // Persistent buffers first, then results in schedule order, then workspaces in step order.
  std::vector<PlannedBuffer> buffers;
  std::vector<PlannedStep> steps;      // the schedule, one entry per step
  std::vector<std::int64_t> timeline;  // live bytes per step, workspace included
  std::vector<RankPlan> ranks;         // one entry per device

  // arena / peak (1.0 when there is nothing to place).
  double fragmentation() const;
  // Indices of the buffers alive at `step`, largest first (ties by index).
  std::vector<size_t> liveAt(int step) const;
};

}  // namespace gradc::ir
