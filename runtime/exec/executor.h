// The executor: runs an ir::Graph node by node, in program order, with the kernel table.
//
// create() does all per-graph work once: it verifies the graph, resolves every node's kernel
// (an op without one is an error naming it), numbers every value with a slot, and computes
// for each node which slots die after it (the last use of each value, graph outputs
// excepted). run() then only binds tensors, calls kernels and drops references, so an
// intermediate tensor is freed right after its last user -- the runtime counterpart of the
// memory planner's liveness.
//
// State: parameters and optimizer state (everything in graph.params()) live in a TensorMap the
// caller owns and passes to every run. Optimizer ops update those tensors in place, so after a
// training step `state` holds the new values; run() never replaces a state entry.
//
// Lifetime: the Executor keeps a pointer to the graph. The graph must outlive the Executor and
// must not be changed while it exists (create a new Executor after rewriting a graph).
//
// Two ways to run, the same arithmetic and bits:
//  - With a memory plan (arena execution, the default of `gradc train`): create() allocates the
//    plan's arena once from the device, and every planned buffer is a fixed range of it.
//    Parameters, optimizer state and inputs live at their planned offsets for the executor's
//    whole life (adoptState moves the caller's state there; stageInputs / run copy inputs in);
//    each non-view result is written by its kernel into its planned buffer (KernelArgs::outs);
//    views alias their base as before. A buffer is "in use" from its plan's first step to its
//    last: the executor reports exactly that to the MemoryTracker, so the measured peak is the
//    arena bytes in use at the high-water mark plus what kernels allocate beyond their results
//    (their workspace, recorded per step: outsideArenaBytes()). That workspace is planned in the
//    arena too: while a kernel runs, its temporaries are carved from the step's planned
//    workspace range (MemoryTracker::setWorkspaceRegion), and only what does not fit goes to the
//    heap. Outputs returned by run() are views of the arena, valid until the next run.
//  - Without a plan (reference counting, `GRADC_NO_ARENA=1`): every result is a fresh ATen
//    tensor, freed after its last use -- the path the arena is checked against.
//
// Arena check (ExecutorOptions::checkArena, `GRADC_ARENA_CHECK=1`): every byte of the arena
// outside a buffer in use holds a poison pattern; a buffer's range is checked to be untouched
// when its interval begins and poisoned again when it ends, and the free ranges are checked at
// the end of each run. A kernel that writes a buffer outside its planned interval (a dead
// buffer, a buffer not yet begun, past its end) is an Error naming the buffer and the step.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/memory_plan.h"
#include "ir/status.h"
#include "runtime/device/device.h"
#include "runtime/core/step_scalars.h"
#include "runtime/core/tensor_map.h"
#include "runtime/kernels/generated_kernels.h"
#include "runtime/kernels/kernels.h"
#include "runtime/exec/beyond_plan.h"

namespace gradc::ir {
class ValueNames;
}  // namespace gradc::ir

namespace gradc::runtime {

struct ExecutorOptions {
  const Device* device = nullptr;  // nullptr: the CPU
  bool checkArena = false;         // poison free arena ranges and check them (slow; for tests)
  // Run inside this executor's arena instead of allocating one (the evaluation step inside the
  // training step's arena, passes/evaluation_plan.h). A persistent buffer planned under the same
  // name, offset and size as one of the host's is shared: read in place, accounted by the host.
  // No other buffer may overlap a host persistent buffer, and the plan's arena must fit the
  // host's. The host must outlive this executor, and the two never run at the same time.
  const class Executor* arenaOf = nullptr;
};

// True when the environment asks for the reference-counted path (GRADC_NO_ARENA=1).
bool arenaDisabledByEnvironment();
// True when the environment asks for the arena check (GRADC_ARENA_CHECK=1).
bool arenaCheckRequestedByEnvironment();

class Executor {
 public:
  // Called after each node when set, with the node's wall time (kernel call only).
  using NodeHook = std::function<void(const ir::Node& node, std::chrono::nanoseconds elapsed)>;
  // Called right before each node's kernel when set, after the previous node's dead values were
  // released: a memory probe sees exactly the live set the node starts from.
  using BeforeNodeHook = std::function<void(const ir::Node& node)>;

  static Expected<Executor> create(const ir::Graph& graph);
  // Arena execution of `plan`, which must be the memory plan of exactly this graph in this
  // order (names, sizes and steps are checked; a mismatch is an Error). Allocates the arena.
  static Expected<Executor> create(const ir::Graph& graph, const ir::MemoryPlan& plan, const ExecutorOptions& options = {});

  Executor(Executor&&) noexcept = default;
  Executor& operator=(Executor&&) noexcept = default;
  ~Executor();

  bool usesArena() const { return arena_ != nullptr; }
  std::int64_t arenaBytes() const { return arenaSize_; }
  // Arena execution: copies every parameter and optimizer-state tensor of `state` into its
  // planned buffer and replaces the entry with the arena tensor (the caller's tensors are
  // released). Optimizer steps then update the arena in place. No-op without an arena.
  Status adoptState(TensorMap& state) const;
  // Arena execution, after the last run: makes `state` (the views adoptState made) the caller's
  // own, valid after this executor is gone. On the host nothing is copied: each tensor shares
  // the arena's ownership, and the arena's pages that hold no state go back to the system, so
  // the process's resident memory never grows by the state's size at the end of a run (a copy
  // would: 3x the parameters' bytes with AdamW). Off the host the state is copied to host
  // memory. No run may follow. No-op without an arena.
  void releaseState(TensorMap& state);
  // Arena execution: copies inputs into their planned buffers, so the caller can drop its own
  // tensors before run() (which then needs no inputs). No-op without an arena.
  Status stageInputs(const TensorMap& inputs) const;
  // Arena execution: the most bytes each step's kernel allocated outside the arena, over the
  // runs so far (empty without an arena or when the MemoryTracker is not installed).
  const std::vector<std::int64_t>& outsideArenaBytes() const { return outside_; }
  // Arena execution: the most bytes each step's kernel took from the heap (temporaries that did
  // not fit, or had no, planned workspace range), over the runs so far.
  const std::vector<std::int64_t>& heapBytes() const { return heap_; }
  // Arena execution: the steps whose kernels allocated more outside the arena than their
  // planned workspace, the largest excess first, at most `limit` of them.
  std::vector<BeyondPlan> stepsBeyondPlan(std::size_t limit) const;
  // Arena execution on a non-host device: the step at which the last run's device peak was
  // reached, with what its kernel allocated beside the arena and its planned workspace;
  // nullopt on the host or before a run.
  std::optional<BeyondPlan> devicePeakStep() const;
  // Arena execution on a non-host device: the last run's peak on the device, the most of (arena
  // bytes in use + the device's internal bytes at their high-water mark) over its steps. On the
  // host the MemoryTracker's peak is the measurement (0 here).
  std::int64_t devicePeakBytes() const { return devicePeak_; }
  const Device& device() const { return device_ ? *device_ : cpuDevice(); }
  // How many of the last run's 0-dim operands (learning rate, step, gradient scale) were read
  // on the host: once per value per step, however many kernels read it (runtime/core/step_scalars.h).
  std::int64_t scalarReads() const { return stepScalars_.reads(); }

  // One execution. Every graph input must be in `inputs` and every parameter in `state`, each
  // with exactly its IR type (extra entries are ignored). Returns the graph outputs by name; an
  // output that is an input or parameter is returned as that same tensor (not a copy).
  // Kernel failures (ATen errors) come back as an Error naming the node.
  Expected<TensorMap> run(const TensorMap& inputs, TensorMap& state, const RunContext& ctx) const;

  // The generated kernels of the graph's fused nodes and one-pass updates
  // (runtime/kernels/generated_kernels.h): each such node's kernel is resolved here, once, and handed to
  // it on every run (KernelArgs::generated). An Error (nothing changed) when one has none there.
  Status setGeneratedKernels(std::shared_ptr<const GeneratedKernels> kernels);

  void setNodeHook(NodeHook hook) { hook_ = std::move(hook); }
  void setBeforeNodeHook(BeforeNodeHook hook) { beforeHook_ = std::move(hook); }
  const ir::Graph& graph() const { return *graph_; }

 private:
  static constexpr int kNoSlot = -1;

  struct Binding {
    const ir::Value* value;
    int slot;  // kNoSlot: checked but not used by any node
  };
  struct Step {
    const ir::Node* node;
    KernelFn kernel;
    std::vector<int> operands;  // slots, in operand order
    std::vector<int> results;   // slots, in result order; kNoSlot: dropped at once (unused)
    std::vector<int> release;   // slots whose last use is this node
    // Arena execution only:
    std::vector<at::Tensor> outs;  // per result: its planned buffer, or undefined (a view)
    std::vector<int> begin;        // arena buffers whose interval starts here
    std::vector<int> end;          // arena buffers whose interval ends here
    std::int64_t beginBytes = 0, endBytes = 0;
    // The step's planned workspace range (the kernel's temporaries are carved from it).
    std::int64_t workspaceOffset = 0, workspaceBytes = 0;
    GeneratedCall generated;  // fn == nullptr: the node runs no generated kernel
  };
  // A planned buffer of the arena (not persistent, not workspace), for accounting and checks.
  struct Placed {
    std::string name;
    std::int64_t offset, size;
    bool output;  // holds a graph output: left alone at the end of a run
  };
  // Persistent bytes reported to the MemoryTracker for the executor's lifetime.
  struct ArenaAccount {
    std::int64_t bytes = 0;
    ~ArenaAccount();
  };
  struct OutputBinding {
    std::string name;
    int slot;
  };

  explicit Executor(const ir::Graph& graph) : graph_(&graph) {}
  Status bindArena(const ir::MemoryPlan& plan, const ExecutorOptions& options);
  // Each step's kernel on `device` (runtime/kernels/kernels.h: its own, else the portable one).
  Status resolveKernels(const Device& device);
  Status checkPlanAgainstGraph(const ir::MemoryPlan& plan, const std::unordered_map<std::string_view, size_t>& byName,
                               const ir::ValueNames& names) const;
  Status checkPoison(const Placed& b, size_t step, const char* when) const;
  void poison(const Placed& b) const;
  static Placed workspaceOf(const Step& step);

  const ir::Graph* graph_;
  std::vector<Binding> inputs_;
  std::vector<Binding> params_;
  std::vector<Step> steps_;
  std::vector<OutputBinding> outputs_;
  int numSlots_ = 0;
  NodeHook hook_;
  BeforeNodeHook beforeHook_;
  std::shared_ptr<const GeneratedKernels> kernels_;

  // Arena execution.
  mutable StepScalars stepScalars_;  // the last run's (scalarReads())
  const Device* device_ = nullptr;
  std::shared_ptr<std::byte> arena_;  // shared with the evaluation executor and released state
  std::int64_t arenaSize_ = 0;
  std::unique_ptr<ArenaAccount> account_;
  std::vector<at::Tensor> inputArena_;  // per inputs_ entry: its planned buffer, or undefined
  std::vector<at::Tensor> paramArena_;  // per params_ entry
  std::vector<Placed> placed_;
  std::vector<Placed> persistent_;  // parameters, optimizer state, inputs (owned or shared)
  std::int64_t freeFrom_ = 0;  // the arena beyond the persistent buffers
  bool checkArena_ = false;
  mutable std::vector<bool> staged_;  // per inputs_ entry: copied in by stageInputs
  mutable std::vector<std::int64_t> outside_;
  mutable std::int64_t devicePeakStep_ = -1, devicePeakOutside_ = 0;
  mutable std::vector<std::int64_t> heap_;
  mutable std::int64_t devicePeak_ = 0;
};

// "f32[4, 8]" for a tensor (its ATen dtype name if it has no IR dtype).
std::string describeTensor(const at::Tensor& tensor);

// Ok when the kernel's results are exactly the node's IR results (count, dtype, shape) and,
// for ops that are not views (OpInfo::view), fresh: contiguous and sharing no storage with the
// operands -- the memory planner's model (passes/memory/storage.h). Otherwise an Error naming the
// node. The executor runs it after every node: a mismatch is a kernel bug, and catching it at
// the node saves a long hunt downstream.
Status checkResults(const ir::Node& node, std::span<const at::Tensor> results,
                    std::span<const at::Tensor> operands = {});

// Runs one op eagerly on tensors: infers the result types from the operand types and
// attributes (errors as for graph building), runs the kernel and checks its results. For
// tests, debugging and tools; graphs should go through Executor.
Expected<std::vector<at::Tensor>> callOp(std::string_view opName, std::span<const at::Tensor> operands,
                                         const ir::AttrMap& attrs = {}, const RunContext& ctx = {});

}  // namespace gradc::runtime
