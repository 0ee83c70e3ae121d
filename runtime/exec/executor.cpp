#include "runtime/exec/executor.h"

#include <c10/util/Exception.h>

#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <unordered_map>

#include "ir/arena_overlap.h"
#include "ir/fused_body.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/core/dtype_map.h"
#include "runtime/exec/kernel_call.h"
#include "runtime/exec/memory_tracker.h"

namespace gradc::runtime {
namespace {

// "at '%3 = relu(%2) : f32[4] fwd  # act': " -- the node as printed, like the verifier does.
std::string atNode(const ir::Graph& graph, const ir::Node& node) {
  return "at '" + ir::printNode(node, ir::ValueNames(graph)) + "': ";
}

// Copies `given` into the planned buffer `arena` of `value` (nothing when it already is that
// buffer); an Error naming the value when the types differ.
Status copyIntoArena(std::string_view what, const ir::Value& value, const at::Tensor& given, const at::Tensor& arena) {
  if (!hasType(given, value.type()))
    return Error{std::string(what) + " '" + value.name() + "': expected " + ir::toString(value.type()) + ", got " +
                 describeTensor(given)};
  if (given.data_ptr() != arena.data_ptr()) arena.copy_(given);
  return {};
}

bool envFlag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}

constexpr unsigned char kPoison = 0xA5;

}  // namespace

bool arenaDisabledByEnvironment() { return envFlag("GRADC_NO_ARENA"); }
bool arenaCheckRequestedByEnvironment() { return envFlag("GRADC_ARENA_CHECK"); }

Executor::ArenaAccount::~ArenaAccount() { MemoryTracker::addArenaBytes(-bytes); }

Executor::~Executor() = default;

Expected<Executor> Executor::create(const ir::Graph& graph, const ir::MemoryPlan& plan, const ExecutorOptions& options) {
  Expected<Executor> exec = create(graph);
  if (!exec) return exec;
  if (Status s = exec->bindArena(plan, options); !s)
    return s.error().withContext("cannot execute graph '" + graph.name() + "' with its memory plan: ");
  return exec;
}

Status Executor::bindArena(const ir::MemoryPlan& plan, const ExecutorOptions& options) {
  const ir::Graph& graph = *graph_;
  const auto& nodes = graph.nodes();
  if (plan.steps.size() != nodes.size())
    return Error{"the plan has " + std::to_string(plan.steps.size()) + " steps, the graph " + std::to_string(nodes.size()) +
                 " nodes"};
  device_ = options.device ? options.device : &cpuDevice();
  if (Status s = resolveKernels(*device_); !s) return s;
  checkArena_ = options.checkArena;
  if (checkArena_ && !device_->isHost())
    return Error{"the arena check (GRADC_ARENA_CHECK=1) reads the arena from the host: it runs on the CPU device only, "
                 "not on " + device_->name()};
  std::unordered_map<std::string_view, size_t> byName;  // lookups only
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (!plan.buffers[i].workspace() && !byName.emplace(plan.buffers[i].name, i).second)
      return Error{"buffer '" + plan.buffers[i].name + "' is planned twice"};
  const Executor* host = options.arenaOf;
  if (host) {
    if (!host->arena_) return Error{"the executor whose arena it shares has none"};
    if (&host->device() != device_) return Error{"it shares the arena of an executor on another device"};
    if (plan.arenaBytes > host->arenaSize_)
      return Error{"its plan needs an arena of " + std::to_string(plan.arenaBytes) + " bytes, the arena it shares has " +
                   std::to_string(host->arenaSize_)};
    arena_ = host->arena_;
    arenaSize_ = host->arenaSize_;
  } else {
    Expected<DeviceMemory> memory = device_->allocate(plan.arenaBytes);
    if (!memory) return memory.error();
    const DeviceMemoryDeleter release = memory->get_deleter();
    arena_ = std::shared_ptr<std::byte>(memory->release(), release);
    arenaSize_ = plan.arenaBytes;
  }
  if (!arena_)  // an empty arena: never written or freed
    arena_ = std::shared_ptr<std::byte>(reinterpret_cast<std::byte*>(&arenaSize_), [](std::byte*) {});
  std::byte* base = arena_.get();

  const ir::ValueNames names(graph);
  std::vector<bool> used(plan.buffers.size(), false);
  auto tensorAt = [&](const ir::Value* v, size_t index) -> Expected<at::Tensor> {
    const ir::PlannedBuffer& b = plan.buffers[index];
    const ir::TensorType& type = v->type();
    if (b.size != type.bytes())
      return Error{"buffer '" + b.name + "' has " + std::to_string(b.size) + " bytes, the value (" +
                   ir::toString(type) + ") " + std::to_string(type.bytes())};
    used[index] = true;
    // The device is stated, not inferred from the pointer (an empty arena's base is a host
    // address standing in for no memory at all).
    const at::TensorOptions options = device_->options(type.dtype);
    return at::for_blob(base + b.offset, type.shape).options(options).target_device(options.device()).make_tensor();
  };
  auto bindPersistent = [&](const std::vector<Binding>& bindings, std::vector<at::Tensor>& arena,
                            const char* what) -> Status {
    arena.assign(bindings.size(), at::Tensor());
    for (size_t i = 0; i < bindings.size(); ++i) {
      auto it = byName.find(names(bindings[i].value));
      if (it == byName.end()) {
        if (bindings[i].slot == kNoSlot) continue;  // unused: never read, never planned
        return Error{std::string(what) + " " + names(bindings[i].value) + " has no buffer in the plan"};
      }
      if (!plan.buffers[it->second].persistent())
        return Error{"buffer '" + plan.buffers[it->second].name + "' of " + what + " is not persistent"};
      Expected<at::Tensor> t = tensorAt(bindings[i].value, it->second);
      if (!t) return t.error();
      arena[i] = std::move(*t);
    }
    return {};
  };
  if (Status s = bindPersistent(inputs_, inputArena_, "input"); !s) return s;
  if (Status s = bindPersistent(params_, paramArena_, "parameter"); !s) return s;
  staged_.assign(inputs_.size(), false);

  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& node = *nodes[i];
    Step& step = steps_[i];
    step.outs.assign(node.numResults(), at::Tensor());
    for (size_t r = 0; r < node.numResults(); ++r) {
      auto it = byName.find(names(node.result(r)));
      if (it == byName.end()) {
        if (!node.op().view)
          return Error{"result " + names(node.result(r)) + " of step " + std::to_string(i) + " (" +
                       std::string(node.opName()) + ") has no buffer in the plan"};
        continue;
      }
      const ir::PlannedBuffer& b = plan.buffers[it->second];
      if (b.persistent() || b.firstStep != static_cast<int>(i))
        return Error{"buffer '" + b.name + "' starts at step " + std::to_string(b.firstStep) +
                     ", but its value is produced at step " + std::to_string(i)};
      Expected<at::Tensor> t = tensorAt(node.result(r), it->second);
      if (!t) return t.error();
      step.outs[r] = std::move(*t);
    }
  }
  std::int64_t persistent = 0;
  const int last = static_cast<int>(nodes.size()) - 1;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const ir::PlannedBuffer& b = plan.buffers[i];
    if (b.offset % static_cast<std::int64_t>(kArenaAlignment) != 0)
      return Error{"buffer '" + b.name + "' is at offset " + std::to_string(b.offset) + ", not a multiple of " +
                   std::to_string(kArenaAlignment) + " (a plan from an older gradc? recompile it)"};
    if (b.workspace()) {
      // Reserved rounded up to the alignment, like every buffer.
      Step& step = steps_[static_cast<size_t>(b.firstStep)];
      step.workspaceOffset = b.offset;
      step.workspaceBytes = (b.size + static_cast<std::int64_t>(kArenaAlignment) - 1) /
                            static_cast<std::int64_t>(kArenaAlignment) * static_cast<std::int64_t>(kArenaAlignment);
      if (b.offset + step.workspaceBytes > arenaSize_) step.workspaceBytes = arenaSize_ - b.offset;
      continue;
    }
    if (!used[i] && !b.persistent())
      return Error{"buffer '" + b.name + "' belongs to no value of the graph (a plan of another graph?)"};
    if (b.persistent()) {
      persistent_.push_back({b.name, b.offset, b.size, false});
      const bool shared = host && std::any_of(host->persistent_.begin(), host->persistent_.end(), [&](const Placed& h) {
                            return h.name == b.name && h.offset == b.offset && h.size == b.size;
                          });
      if (!shared) persistent += b.size;
      continue;
    }
    const int index = static_cast<int>(placed_.size());
    placed_.push_back({b.name, b.offset, b.size, b.lastStep == last});
    steps_[static_cast<size_t>(b.firstStep)].begin.push_back(index);
    steps_[static_cast<size_t>(b.firstStep)].beginBytes += b.size;
    steps_[static_cast<size_t>(b.lastStep)].end.push_back(index);
    steps_[static_cast<size_t>(b.lastStep)].endBytes += b.size;
  }
  if (Status s = checkPlanAgainstGraph(plan, byName, names); !s) return s;
  if (host)  // what is not shared must leave the host's weights, optimizer state and inputs alone
    for (const ir::PlannedBuffer& b : plan.buffers)
      for (const Placed& h : host->persistent_)
        if (b.offset < h.offset + h.size && h.offset < b.offset + b.size &&
            !(b.persistent() && b.name == h.name && b.offset == h.offset && b.size == h.size))
          return Error{"buffer '" + b.name + "' (bytes " + std::to_string(b.offset) + ".." +
                       std::to_string(b.offset + b.size) + ") overlaps '" + h.name + "' of the arena it shares"};
  account_ = std::make_unique<ArenaAccount>();
  account_->bytes = persistent;
  MemoryTracker::addArenaBytes(persistent);
  outside_.assign(nodes.size(), 0);
  heap_.assign(nodes.size(), 0);
  return {};
}

// What the runtime checks of a plan it did not make (an artifact's, which an edit can change
// with its checksums recomputed), beyond the sizes and first steps bindArena checks while
// binding: every value's buffer (a view's: its base's) lives until the value's last reader,
// and the graph's outputs until the end; no two buffers alive at a common step share a byte
// (persistent ones are alive at every step). A plan failing either would make one tensor
// overwrite another while it is still read: a different model, silently.
Status Executor::checkPlanAgainstGraph(const ir::MemoryPlan& plan,
                                       const std::unordered_map<std::string_view, size_t>& byName,
                                       const ir::ValueNames& names) const {
  const ir::Graph& graph = *graph_;
  const auto& nodes = graph.nodes();
  const int last = static_cast<int>(nodes.size()) - 1;
  auto bufferOf = [&](const ir::Value* v) -> const ir::PlannedBuffer* {
    for (;;) {  // a view without a buffer of its own reads its base's
      if (auto it = byName.find(names(v)); it != byName.end()) return &plan.buffers[it->second];
      if (!v->producer() || !v->producer()->op().view) return nullptr;
      v = v->producer()->operand(0);
    }
  };
  auto liveUntil = [&](const ir::Value* v, int step, const std::string& reader) -> Status {
    const ir::PlannedBuffer* b = bufferOf(v);
    if (!b || b->persistent() || b->lastStep >= step) return {};
    return Error{"buffer '" + b->name + "' ends at step " + std::to_string(b->lastStep) + ", but " + names(v) +
                 " is read by " + reader + " (the plan does not belong to this graph, or was edited)"};
  };
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Value* v : nodes[i]->operands())
      if (Status s = liveUntil(v, static_cast<int>(i), "step " + std::to_string(i)); !s) return s;
  for (const ir::GraphOutput& out : graph.outputs())
    if (Status s = liveUntil(out.value, last, "the step's output '" + out.name + "'"); !s) return s;

  std::vector<ir::ArenaInterval> intervals;
  intervals.reserve(plan.buffers.size());
  for (const ir::PlannedBuffer& b : plan.buffers)
    intervals.push_back({b.offset, b.size, b.persistent() ? 0 : b.firstStep, b.persistent() ? last : b.lastStep});
  if (auto pair = ir::findArenaOverlap(intervals)) {
    auto describe = [&](size_t i) {
      const ir::PlannedBuffer& b = plan.buffers[i];
      return "'" + b.name + "' (bytes " + std::to_string(b.offset) + ".." + std::to_string(b.offset + b.size) +
             ", steps " + std::to_string(intervals[i].firstStep) + ".." + std::to_string(intervals[i].lastStep) + ")";
    };
    return Error{"buffers " + describe(pair->first) + " and " + describe(pair->second) +
                 " share bytes while both are alive (the plan was edited or damaged)"};
  }
  return {};
}

Executor::Placed Executor::workspaceOf(const Step& step) {
  return {"workspace of step", step.workspaceOffset, step.workspaceBytes, false};
}

void Executor::poison(const Placed& b) const {
  std::memset(arena_.get() + b.offset, kPoison, static_cast<size_t>(b.size));
}

Status Executor::checkPoison(const Placed& b, size_t step, const char* when) const {
  const auto* bytes = reinterpret_cast<const unsigned char*>(arena_.get() + b.offset);
  for (std::int64_t i = 0; i < b.size; ++i)
    if (bytes[i] != kPoison)
      return Error{"arena check: byte " + std::to_string(b.offset + i) + " of buffer '" + b.name + "' (offset " +
                   std::to_string(b.offset) + ", " + std::to_string(b.size) + " bytes) was written " + when +
                   " step " + std::to_string(step) + ", outside every planned interval that holds it"};
  return {};
}

Status Executor::adoptState(TensorMap& state) const {
  if (!arena_) return {};
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!paramArena_[i].defined()) continue;
    auto it = state.find(params_[i].value->name());
    if (it == state.end()) return Error{"parameter '" + params_[i].value->name() + "' is missing"};
    if (Status s = copyIntoArena("parameter", *params_[i].value, it->second, paramArena_[i]); !s) return s;
    it->second = paramArena_[i];
  }
  return {};
}

Status Executor::stageInputs(const TensorMap& inputs) const {
  if (!arena_) return {};
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!inputArena_[i].defined()) continue;
    auto it = inputs.find(inputs_[i].value->name());
    if (it == inputs.end()) continue;
    if (Status s = copyIntoArena("input", *inputs_[i].value, it->second, inputArena_[i]); !s) return s;
    staged_[i] = true;
  }
  return {};
}

// The device's kernels: its own where it has them, the portable ones for the rest.
Status Executor::resolveKernels(const Device& device) {
  for (Step& step : steps_) {
    const KernelFn* kernel = findKernel(step.node->opName(), device);
    if (!kernel)
      return Error{"no kernel for op '" + std::string(step.node->opName()) + "' on " + device.name() + " (node '" +
                   ir::printNode(*step.node, ir::ValueNames(*graph_)) + "')"};
    step.kernel = *kernel;
  }
  return {};
}

Expected<Executor> Executor::create(const ir::Graph& graph) {
  if (Status s = ir::verify(graph); !s) return s.error().withContext("cannot execute graph '" + graph.name() + "': ");

  Executor exec(graph);
  std::unordered_map<const ir::Value*, int> slotOf;  // lookups only, never iterated
  auto newSlot = [&](const ir::Value* v) {
    int slot = exec.numSlots_++;
    slotOf.emplace(v, slot);
    return slot;
  };
  for (const auto& v : graph.inputs()) exec.inputs_.push_back({v.get(), v->hasUses() ? newSlot(v.get()) : kNoSlot});
  for (const auto& v : graph.params()) exec.params_.push_back({v.get(), v->hasUses() ? newSlot(v.get()) : kNoSlot});

  // Last use of each value: the index of the last node reading it.
  std::unordered_map<const ir::Value*, size_t> lastUse;
  const auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const ir::Value* v : nodes[i]->operands()) lastUse[v] = i;

  exec.steps_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& node = *nodes[i];
    Step step{&node, nullptr, {}, {}, {}};
    for (const ir::Value* v : node.operands()) {
      step.operands.push_back(slotOf.at(v));
      bool last = lastUse.at(v) == i && !v->isGraphOutput();
      int slot = slotOf.at(v);
      if (last && std::find(step.release.begin(), step.release.end(), slot) == step.release.end())
        step.release.push_back(slot);
    }
    for (size_t r = 0; r < node.numResults(); ++r) {
      const ir::Value* v = node.result(r);
      step.results.push_back(v->hasUses() ? newSlot(v) : kNoSlot);
    }
    exec.steps_.push_back(std::move(step));
  }
  for (const ir::GraphOutput& out : graph.outputs()) exec.outputs_.push_back({out.name, slotOf.at(out.value)});
  if (Status s = exec.resolveKernels(cpuDevice()); !s) return s.error();
  return exec;
}

Status Executor::setGeneratedKernels(std::shared_ptr<const GeneratedKernels> kernels) {
  if (kernels)
    if (Status s = kernels->covers(*graph_); !s) return s;
  std::vector<GeneratedCall> calls(steps_.size());  // assigned only once every one is found
  for (size_t i = 0; i < steps_.size(); ++i) {
    const ir::Node& node = *steps_[i].node;
    const std::string name = kernels ? ir::generatedKernelName(node) : std::string();
    if (name.empty() || !kernels->carries(node)) continue;
    Expected<void*> fn = kernels->function(name, device());
    if (!fn) return fn.error();
    calls[i].fn = *fn;
    if (node.opName() == "fused") {
      // The kernel's random-stream arguments: without them a launch would pass too few.
      Expected<std::shared_ptr<const ir::FusedBody>> body = ir::cachedFusedBody(*ir::getString(node.attrs(), "body"));
      if (!body) return body.error().withContext("fused node of " + node.specName() + ": ");
      calls[i].streams = ir::fusedRandomStreams(**body);
    }
  }
  for (size_t i = 0; i < steps_.size(); ++i) steps_[i].generated = std::move(calls[i]);
  kernels_ = std::move(kernels);
  return {};
}

Expected<TensorMap> Executor::run(const TensorMap& inputs, TensorMap& state, const RunContext& runContext) const {
  std::vector<at::Tensor> slots(static_cast<size_t>(numSlots_));
  RunContext ctx = runContext;
  if (!ctx.device) ctx.device = device_;
  stepScalars_ = StepScalars{};  // the step's 0-dim operands, read on the host once each
  if (!ctx.scalars) ctx.scalars = &stepScalars_;

  auto bind = [&](const Binding& b, const TensorMap& from, std::string_view what) -> Status {
    const std::string& name = b.value->name();
    auto it = from.find(name);
    if (it == from.end())
      return Error{std::string(what) + " '" + name + "' (" + ir::toString(b.value->type()) + ") is missing"};
    if (!hasType(it->second, b.value->type()))
      return Error{std::string(what) + " '" + name + "': expected " + ir::toString(b.value->type()) + ", got " +
                   describeTensor(it->second)};
    if (b.slot != kNoSlot) slots[static_cast<size_t>(b.slot)] = it->second;
    return {};
  };
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Binding& b = inputs_[i];
    if (arena_ && inputArena_[i].defined()) {
      auto it = inputs.find(b.value->name());
      if (it != inputs.end()) {
        if (Status s = copyIntoArena("input", *b.value, it->second, inputArena_[i]); !s) return s.error();
      } else if (!staged_[i]) {
        return Error{"input '" + b.value->name() + "' (" + ir::toString(b.value->type()) + ") is missing"};
      }
      staged_[i] = false;
      if (b.slot != kNoSlot) slots[static_cast<size_t>(b.slot)] = inputArena_[i];
      continue;
    }
    if (Status s = bind(b, inputs, "input"); !s) return s.error();
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const Binding& b = params_[i];
    if (Status s = bind(b, state, "parameter"); !s) return s.error();
    if (arena_ && paramArena_[i].defined()) {
      at::Tensor& entry = state.find(b.value->name())->second;
      if (entry.data_ptr() != paramArena_[i].data_ptr()) {  // not adopted yet: move it into the arena
        paramArena_[i].copy_(entry);
        entry = paramArena_[i];
      }
      if (b.slot != kNoSlot) slots[static_cast<size_t>(b.slot)] = paramArena_[i];
    }
  }
  if (arena_ && checkArena_) {
    // Every transient byte: buffers, and the workspaces (some bytes belong to nothing else).
    for (const Placed& p : placed_) poison(p);
    for (const Step& s : steps_)
      if (s.workspaceBytes > 0) poison(workspaceOf(s));
  }
  // Off the host, the device's own statistics say what ATen allocated beside the arena (there
  // is no planned-workspace carving there: the device's allocator serves every temporary).
  const bool onHost = !arena_ || device_->isHost();
  const bool measureOutside = arena_ && (!onHost || MemoryTracker::installed());
  if (!onHost) devicePeak_ = 0;

  std::vector<at::Tensor> operands;
  for (size_t index = 0; index < steps_.size(); ++index) {
    const Step& step = steps_[index];
    operands.clear();
    for (int slot : step.operands) operands.push_back(slots[static_cast<size_t>(slot)]);
    if (checkArena_)
      for (int b : step.begin)
        if (Status s = checkPoison(placed_[static_cast<size_t>(b)], index, "before"); !s)
          return s.error().withContext(atNode(*graph_, *step.node));
    if (step.beginBytes) MemoryTracker::addArenaBytes(step.beginBytes);
    const KernelArgs args{*step.node, operands, ctx, step.outs, step.generated.fn ? &step.generated : nullptr};
    if (beforeHook_) beforeHook_(*step.node);

    std::int64_t outsideBefore = 0, heapBefore = 0;
    if (measureOutside && onHost) {
      outsideBefore = MemoryTracker::outsideBytes();
      heapBefore = MemoryTracker::heapBytesServed();
      MemoryTracker::resetOutsidePeak();
    } else if (measureOutside) {
      device_->resetInternalPeak();
      outsideBefore = device_->internalBytes();
    }
    const bool region = measureOutside && onHost && step.workspaceBytes > 0;
    if (region) {
      if (checkArena_)
        if (Status s = checkPoison(workspaceOf(step), index, "before"); !s)
          return s.error().withContext(atNode(*graph_, *step.node));
      MemoryTracker::setWorkspaceRegion(arena_.get() + step.workspaceOffset, step.workspaceBytes);
    }
    Expected<std::vector<at::Tensor>> results = [&] {
      if (!hook_) return callKernel(step.kernel, args);
      auto start = std::chrono::steady_clock::now();
      Expected<std::vector<at::Tensor>> r = callKernel(step.kernel, args);
      hook_(*step.node, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start));
      return r;
    }();
    if (measureOutside && onHost) {
      outside_[index] = std::max(outside_[index], MemoryTracker::outsidePeakBytes() - outsideBefore);
      heap_[index] = std::max(heap_[index], MemoryTracker::heapBytesServed() - heapBefore);
    } else if (measureOutside) {
      const std::int64_t internalPeak = device_->internalPeakBytes();
      outside_[index] = std::max(outside_[index], internalPeak - outsideBefore);
      heap_[index] = outside_[index];
      if (MemoryTracker::arenaBytes() + internalPeak > devicePeak_) {
        devicePeak_ = MemoryTracker::arenaBytes() + internalPeak;
        devicePeakStep_ = static_cast<std::int64_t>(index);
        devicePeakOutside_ = internalPeak - outsideBefore;
      }
    }
    if (region) {
      if (std::int64_t kept = MemoryTracker::clearWorkspaceRegion(); kept > 0)
        return Error{atNode(*graph_, *step.node) + "kernel '" + std::string(step.node->opName()) + "' kept " +
                     std::to_string(kept) + " temporary allocation(s) beyond its step; its planned workspace is "
                     "reused by later buffers"};
      if (checkArena_) poison(workspaceOf(step));
    }
    if (!results) return results.error().withContext(atNode(*graph_, *step.node));
    if (Status s = checkResults(*step.node, *results, operands); !s)
      return s.error().withContext(atNode(*graph_, *step.node));
    for (size_t r = 0; r < step.outs.size(); ++r)
      if (step.outs[r].defined() && (*results)[r].data_ptr() != step.outs[r].data_ptr())
        return Error{atNode(*graph_, *step.node) + "kernel '" + std::string(step.node->opName()) + "' result " +
                     std::to_string(r) + " is not in its planned buffer (kernels write into KernelArgs::outs)"};
    // Operand references go first, so a dead operand's memory is freed before the next node.
    operands.clear();
    for (size_t r = 0; r < step.results.size(); ++r)
      if (step.results[r] != kNoSlot) slots[static_cast<size_t>(step.results[r])] = std::move((*results)[r]);
    for (int slot : step.release) slots[static_cast<size_t>(slot)].reset();
    if (step.endBytes) MemoryTracker::addArenaBytes(-step.endBytes);
    if (checkArena_)
      for (int b : step.end)
        if (!placed_[static_cast<size_t>(b)].output) poison(placed_[static_cast<size_t>(b)]);
  }
  if (checkArena_)
    for (const Placed& p : placed_) {
      if (p.output) continue;
      bool overlapsOutput = false;
      for (const Placed& o : placed_)
        overlapsOutput |= o.output && o.offset < p.offset + p.size && p.offset < o.offset + o.size;
      if (!overlapsOutput)
        if (Status s = checkPoison(p, steps_.size(), "after the last"); !s) return s.error();
    }

  TensorMap outputs;
  for (const OutputBinding& out : outputs_) outputs.emplace(out.name, slots[static_cast<size_t>(out.slot)]);
  return outputs;
}

std::optional<BeyondPlan> Executor::devicePeakStep() const {
  if (devicePeakStep_ < 0 || static_cast<size_t>(devicePeakStep_) >= steps_.size()) return std::nullopt;
  const Step& s = steps_[static_cast<size_t>(devicePeakStep_)];
  return BeyondPlan{devicePeakStep_, std::string(s.node->opName()), s.node->specName(), devicePeakOutside_,
                    s.workspaceBytes};
}

std::vector<BeyondPlan> Executor::stepsBeyondPlan(std::size_t limit) const {
  std::vector<BeyondPlan> over;
  for (size_t i = 0; i < outside_.size() && i < steps_.size(); ++i)
    if (outside_[i] > steps_[i].workspaceBytes)
      over.push_back({static_cast<std::int64_t>(i), std::string(steps_[i].node->opName()), steps_[i].node->specName(),
                      outside_[i], steps_[i].workspaceBytes});
  std::stable_sort(over.begin(), over.end(), [](const BeyondPlan& a, const BeyondPlan& b) {
    return a.bytes - a.workspace > b.bytes - b.workspace;
  });
  if (over.size() > limit) over.resize(limit);
  return over;
}

}  // namespace gradc::runtime
