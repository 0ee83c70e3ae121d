// The memory plan's one codec: ir::MemoryPlan as JSON and back, for the compiler (`gradc
// compile SPEC --emit plan`, the artifact's plan files), `gradc inspect plan.json` and the
// runtime, which executes the plan it reads and so trusts nothing in it that it did not check:
// the reader validates every field (types, kinds, intervals inside the timeline, every buffer
// inside its arena without overflow) and names the offending one. The schema is documented in
// docs/memory.md; a contract scripts rely on: fields are added, never renamed; a field made
// required raises the version.
//
//   {"format": "gradc-memory-plan", "version": 2, "model": "gpt-mini", "strategy": "none",
//    "budget_bytes": null, "reserve_bytes": 0, "peak_bytes": 202839052, "peak_step": 110, "arena_bytes": ...,
//    "fragmentation": 1.0, "persistent_bytes": ..., "forward_flops": ..., "backward_flops": ...,
//    "optimizer_flops": ..., "recompute_flops": 0, "loss_chunks": 0,
//    "ranks": [{"rank": 0, "peak_bytes": ..., "arena_bytes": ...}],
//    "buffers": [{"name": "%12", "spec_name": "blocks.0.attn", "kind": "activation",
//                 "space": "device", "residency": "step",
//                 "type": "f32[16, 4, 128, 128]", "size": 4194304, "offset": 40230912,
//                 "first_step": 14, "last_step": 61, "producer": "matmul"}, ...],
//    "steps": [{"op": "embedding", "phase": "fwd", "spec_name": "wte"}, ...],
//    "timeline": [40370692, ...]}
#pragma once

#include <string>
#include <string_view>

#include "ir/memory_plan.h"
#include "ir/status.h"

namespace gradc::runtime {

inline constexpr std::string_view kPlanFormat = "gradc-memory-plan";
// 2: reserve_bytes, loss_chunks and each buffer's space and residency are required.
inline constexpr int kPlanVersion = 2;

// Deterministic text: the same plan always prints the same bytes.
std::string planToJson(const ir::MemoryPlan& plan);

// Parses and validates a plan dump; the error names the offending field
// ("plan.buffers[3].size: ..."). A plan of another version is refused, naming both versions.
Expected<ir::MemoryPlan> planFromJson(std::string_view text);

}  // namespace gradc::runtime
