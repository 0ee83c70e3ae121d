// What the runtime needs of a memory plan to execute it: every buffer's place in the rank's
// arena and the steps over which it is in use. It is read from the plan JSON of a compiled
// artifact (the same dump `gradc compile --emit plan` writes, docs/memory.md), so the runtime
// needs no planner: the compiler plans, the runtime places.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"

namespace gradc::runtime {

struct ArenaBuffer {
  std::string name;  // the owning value as printed in IR: "%12", "%wte.weight"; "workspace(%12)"
  std::string kind;  // param|opt_state|input|activation|grad|optimizer|recompute|comm|workspace
  std::int64_t size = 0;    // bytes
  std::int64_t offset = 0;  // from the arena's base
  int firstStep = 0;        // inclusive; steps are the graph's nodes in program order
  int lastStep = 0;         // inclusive

  // Alive for the whole step (parameters, optimizer state, inputs): placed once.
  bool persistent() const { return kind == "param" || kind == "opt_state" || kind == "input"; }
  // A kernel's temporaries: served beside the arena by the tracked allocator, not placed.
  bool workspace() const { return kind == "workspace"; }
};

struct ArenaPlan {
  std::int64_t arenaBytes = 0;
  std::int64_t peakBytes = 0;
  std::optional<std::int64_t> budgetBytes;  // the budget it was made for; nullopt: none
  std::int64_t reserveBytes = 0;  // of the budget, kept for the device's libraries (absent: 0)
  int steps = 0;  // nodes of the graph the plan was made for
  std::vector<ArenaBuffer> buffers;
};

// The buffers of a plan dump; an Error naming the offending field ("buffers[3].offset: ...")
// for anything malformed or out of range.
Expected<ArenaPlan> arenaPlanFromJson(std::string_view text);

}  // namespace gradc::runtime
