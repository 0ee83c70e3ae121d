// The plan's one codec (runtime/exec/plan_json.h): what the compiler writes reads back to the same
// plan, and the reader refuses what the runtime must not execute, naming the field.
#include "runtime/exec/plan_json.h"

#include <string>

#include <doctest/doctest.h>

using namespace gradc;

namespace {

// Two steps: a parameter held for the run, an activation and a workspace in step 1.
ir::MemoryPlan smallPlan() {
  ir::MemoryPlan p;
  p.model = "m";
  p.peakBytes = 192;
  p.peakStep = 1;
  p.arenaBytes = 192;
  p.persistentBytes = 64;
  p.steps = {{"linear", "fwd", "fc"}, {"mse", "fwd", "loss"}};
  p.timeline = {128, 192};
  ir::PlannedBuffer param{"%w", "fc", ir::BufferKind::Param, ir::MemorySpace::Device, ir::Residency::Persistent,
                          "f32[16]", 64, 0, 0, 1, ""};
  ir::PlannedBuffer act{"%0", "fc", ir::BufferKind::Activation, ir::MemorySpace::Device, ir::Residency::Step,
                        "f32[16]", 64, 64, 0, 1, "linear"};
  ir::PlannedBuffer ws{"workspace(%1)", "loss", ir::BufferKind::Workspace, ir::MemorySpace::Device,
                       ir::Residency::Step, "", 64, 128, 1, 1, "mse"};
  p.buffers = {param, act, ws};
  p.ranks.push_back({0, 192, 192, {{"%0", ir::BufferKind::Activation, "f32[16]", 64}}});
  return p;
}

// The JSON of smallPlan with `from` replaced by `to` (once).
std::string edited(const std::string& from, const std::string& to) {
  std::string text = runtime::planToJson(smallPlan());
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string refusal(const std::string& text) {
  Expected<ir::MemoryPlan> p = runtime::planFromJson(text);
  REQUIRE_FALSE(p.ok());
  return p.error().message;
}

}  // namespace

TEST_CASE("plan codec: a plan reads back to itself, kinds, spaces and residencies included") {
  const std::string text = runtime::planToJson(smallPlan());
  CHECK(text.find("\"kind\":\"param\",\"space\":\"device\",\"residency\":\"persistent\"") != std::string::npos);
  Expected<ir::MemoryPlan> back = runtime::planFromJson(text);
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(runtime::planToJson(*back) == text);
  CHECK(back->buffers[0].persistent());
  CHECK(back->buffers[2].workspace());
  CHECK(back->ranks[0].largestAtPeak[0].kind == ir::BufferKind::Activation);
}

TEST_CASE("plan codec: a plan of another version, or without a field this version requires, is refused") {
  const std::string other = refusal(edited("\"version\": 2", "\"version\": 1"));
  CHECK(other.find("version 1") != std::string::npos);
  CHECK(other.find("reads version 2") != std::string::npos);
  CHECK(refusal(edited(",\"space\":\"device\",\"residency\":\"persistent\"", "")).find("plan.buffers[0]") == 0);
  CHECK(refusal(edited("\"residency\":\"persistent\"", "\"residency_\":\"persistent\"")).find(
            "plan.buffers[0]") == 0);
  CHECK(refusal(edited("  \"reserve_bytes\": 0,\n", "")).find("reserve_bytes") != std::string::npos);
  CHECK(refusal(edited("  \"loss_chunks\": 0,\n", "")).find("loss_chunks") != std::string::npos);
}

TEST_CASE("plan codec: what the runtime must not execute is refused, the field named") {
  CHECK(refusal(edited("\"spec_name\":\"fc\",\"kind\":\"activation\"", "\"spec_name\":\"fc\",\"kind\":\"activations\"")) ==
        "plan.buffers[1].kind: unknown buffer kind \"activations\"");
  CHECK(refusal(edited("\"residency\":\"step\"", "\"residency\":\"forever\"")).find("plan.buffers[1].residency") == 0);
  CHECK(refusal(edited("\"space\":\"device\"", "\"space\":\"host\"")).find("plan.buffers[0].space") == 0);
  const std::string persistentWorkspace = edited("\"kind\":\"workspace\",\"space\":\"device\",\"residency\":\"step\"",
                                                 "\"kind\":\"workspace\",\"space\":\"device\",\"residency\":\"persistent\"");
  CHECK(refusal(persistentWorkspace) == "plan.buffers[2]: a workspace cannot be persistent");
  // offset + size past the largest integer: outside the arena, not a wrap-around.
  CHECK(refusal(edited("\"offset\":128", "\"offset\":9223372036854775800")).find("is not inside the arena") !=
        std::string::npos);
}
