#include "runtime/exec/plan_json.h"

#include "ir/arena_overlap.h"
#include "runtime/core/json_text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gradc::runtime {

using Json = nlohmann::ordered_json;

std::string planToJson(const ir::MemoryPlan& plan) {
  Json j;
  j["format"] = kPlanFormat;
  j["version"] = kPlanVersion;
  j["model"] = plan.model;
  j["strategy"] = plan.strategy;
  j["budget_bytes"] = plan.budgetBytes ? Json(*plan.budgetBytes) : Json(nullptr);
  j["reserve_bytes"] = plan.reserveBytes;
  j["peak_bytes"] = plan.peakBytes;
  j["peak_step"] = plan.peakStep;
  j["arena_bytes"] = plan.arenaBytes;
  j["fragmentation"] = std::round(plan.fragmentation() * 1e4) / 1e4;
  j["persistent_bytes"] = plan.persistentBytes;
  j["forward_flops"] = plan.forwardFlops;
  j["backward_flops"] = plan.backwardFlops;
  j["optimizer_flops"] = plan.optimizerFlops;
  j["recompute_flops"] = plan.recomputeFlops;
  j["loss_chunks"] = plan.lossChunks;
  j["ranks"] = Json::array();
  for (const ir::RankPlan& r : plan.ranks) {
    Json e = {{"rank", r.rank}, {"peak_bytes", r.peakBytes}, {"arena_bytes", r.arenaBytes}};
    if (!r.largestAtPeak.empty()) {
      e["largest_at_peak"] = Json::array();
      for (const ir::RankBuffer& b : r.largestAtPeak)
        e["largest_at_peak"].push_back(
            {{"name", b.name}, {"kind", ir::bufferKindName(b.kind)}, {"type", b.type}, {"size", b.size}});
    }
    j["ranks"].push_back(std::move(e));
  }
  j["buffers"] = Json::array();
  for (const ir::PlannedBuffer& b : plan.buffers) {
    Json e;
    e["name"] = b.name;
    e["spec_name"] = b.specName;
    e["kind"] = ir::bufferKindName(b.kind);
    e["space"] = ir::memorySpaceName(b.space);
    e["residency"] = ir::residencyName(b.residency);
    e["type"] = b.type.empty() ? Json(nullptr) : Json(b.type);
    e["size"] = b.size;
    e["offset"] = b.offset;
    e["first_step"] = b.firstStep;
    e["last_step"] = b.lastStep;
    e["producer"] = b.producer.empty() ? Json(nullptr) : Json(b.producer);
    j["buffers"].push_back(std::move(e));
  }
  j["steps"] = Json::array();
  for (const ir::PlannedStep& s : plan.steps)
    j["steps"].push_back({{"op", s.op}, {"phase", s.phase}, {"spec_name", s.specName}});
  j["timeline"] = plan.timeline;
  // One buffer / step per line keeps large plans readable and diffable.
  std::string out = "{\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    out += first ? "" : ",\n";
    first = false;
    out += "  " + Json(it.key()).dump() + ": ";
    if (it.value().is_array() && it.key() != "timeline" && !it.value().empty()) {
      out += "[\n";
      for (size_t i = 0; i < it.value().size(); ++i)
        out += "    " + it.value()[i].dump() + (i + 1 < it.value().size() ? ",\n" : "\n");
      out += "  ]";
    } else {
      out += it.value().dump();
    }
  }
  return out + "\n}\n";
}

namespace {

// Field access; errors name the path of the offending field ("plan.buffers[3].size").
Expected<const Json*> field(const Json& obj, const std::string& path, std::string_view key) {
  if (!obj.is_object()) return Error{path + ": expected an object"};
  auto it = obj.find(std::string(key));
  if (it == obj.end()) return Error{path + ": missing field '" + std::string(key) + "'"};
  return &*it;
}

Expected<std::int64_t> integer(const Json& obj, const std::string& path, std::string_view key) {
  Expected<const Json*> f = field(obj, path, key);
  if (!f) return f.error();
  if (!(*f)->is_number_integer()) return Error{path + "." + std::string(key) + ": expected an integer"};
  return (*f)->get<std::int64_t>();
}

// A string; with `nullable`, null reads as "".
Expected<std::string> textField(const Json& obj, const std::string& path, std::string_view key, bool nullable = false) {
  Expected<const Json*> f = field(obj, path, key);
  if (!f) return f.error();
  if (nullable && (*f)->is_null()) return std::string();
  if (!(*f)->is_string()) return Error{path + "." + std::string(key) + ": expected a string"};
  return (*f)->get<std::string>();
}

Expected<const Json*> array(const Json& obj, const std::string& path, std::string_view key) {
  Expected<const Json*> f = field(obj, path, key);
  if (!f) return f;
  if (!(*f)->is_array()) return Error{path + "." + std::string(key) + ": expected an array"};
  return f;
}

#define GRADC_TRY(var, expr)            \
  auto var##_r = (expr);                \
  if (!var##_r) return var##_r.error(); \
  auto var = std::move(*var##_r)

}  // namespace

Expected<ir::MemoryPlan> planFromJson(std::string_view text) {
  if (std::string deep = jsonNestingError(text); !deep.empty()) return Error{deep};
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"not valid JSON"};
  if (!j.is_object()) return Error{"not a memory plan: the top level is not an object"};
  const std::string root = "plan";
  GRADC_TRY(format, textField(j, root, "format"));
  if (format != kPlanFormat)
    return Error{"not a memory plan: format is \"" + format + "\", expected \"" + std::string(kPlanFormat) + "\""};
  GRADC_TRY(version, integer(j, root, "version"));
  if (version != kPlanVersion)
    return Error{"memory plan format version " + std::to_string(version) + ", but this gradc reads version " +
                 std::to_string(kPlanVersion) + " only: recompile the spec to write it again"};

  ir::MemoryPlan plan;
  GRADC_TRY(model, textField(j, root, "model"));
  plan.model = model;
  GRADC_TRY(strategy, textField(j, root, "strategy"));
  plan.strategy = strategy;
  GRADC_TRY(budget, field(j, root, "budget_bytes"));
  if (budget->is_number_integer()) plan.budgetBytes = budget->get<std::int64_t>();
  else if (!budget->is_null()) return Error{"plan.budget_bytes: expected an integer or null"};
  GRADC_TRY(reserve, integer(j, root, "reserve_bytes"));
  if (reserve < 0) return Error{"plan.reserve_bytes: expected a non-negative integer"};
  plan.reserveBytes = reserve;
  GRADC_TRY(peak, integer(j, root, "peak_bytes"));
  GRADC_TRY(peakStep, integer(j, root, "peak_step"));
  GRADC_TRY(arena, integer(j, root, "arena_bytes"));
  GRADC_TRY(persistent, integer(j, root, "persistent_bytes"));
  GRADC_TRY(fwd, integer(j, root, "forward_flops"));
  GRADC_TRY(bwd, integer(j, root, "backward_flops"));
  GRADC_TRY(opt, integer(j, root, "optimizer_flops"));
  GRADC_TRY(rec, integer(j, root, "recompute_flops"));
  plan.peakBytes = peak;
  plan.arenaBytes = arena;
  plan.persistentBytes = persistent;
  plan.forwardFlops = fwd;
  plan.backwardFlops = bwd;
  plan.optimizerFlops = opt;
  plan.recomputeFlops = rec;
  GRADC_TRY(chunks, integer(j, root, "loss_chunks"));
  if (chunks < 0) return Error{"plan.loss_chunks: must not be negative"};
  plan.lossChunks = static_cast<int>(std::min<std::int64_t>(chunks, INT32_MAX));
  if (peak < 0 || arena < 0 || persistent < 0) return Error{"plan: byte counts must not be negative"};

  GRADC_TRY(timeline, array(j, root, "timeline"));
  for (size_t i = 0; i < timeline->size(); ++i) {
    const Json& v = (*timeline)[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
      return Error{"plan.timeline[" + std::to_string(i) + "]: expected a non-negative integer"};
    plan.timeline.push_back(v.get<std::int64_t>());
  }
  const auto steps = static_cast<std::int64_t>(plan.timeline.size());
  if (steps > 0 && (peakStep < 0 || peakStep >= steps))
    return Error{"plan.peak_step: " + std::to_string(peakStep) + " is outside the timeline's " + std::to_string(steps) +
                 " steps"};
  plan.peakStep = static_cast<int>(peakStep);

  GRADC_TRY(stepList, array(j, root, "steps"));
  if (static_cast<std::int64_t>(stepList->size()) != steps)
    return Error{"plan.steps: " + std::to_string(stepList->size()) + " entries, but the timeline has " +
                 std::to_string(steps)};
  for (size_t i = 0; i < stepList->size(); ++i) {
    const std::string path = "plan.steps[" + std::to_string(i) + "]";
    const Json& e = (*stepList)[i];
    GRADC_TRY(op, textField(e, path, "op"));
    GRADC_TRY(phase, textField(e, path, "phase"));
    GRADC_TRY(spec, textField(e, path, "spec_name"));
    plan.steps.push_back({op, phase, spec});
  }

  GRADC_TRY(ranks, array(j, root, "ranks"));
  for (size_t i = 0; i < ranks->size(); ++i) {
    const std::string path = "plan.ranks[" + std::to_string(i) + "]";
    GRADC_TRY(rank, integer((*ranks)[i], path, "rank"));
    GRADC_TRY(rankPeak, integer((*ranks)[i], path, "peak_bytes"));
    GRADC_TRY(rankArena, integer((*ranks)[i], path, "arena_bytes"));
    ir::RankPlan rp{static_cast<int>(rank), rankPeak, rankArena, {}};
    if (const Json& e = (*ranks)[i]; e.contains("largest_at_peak") && e["largest_at_peak"].is_array())
      for (const Json& b : e["largest_at_peak"])
        if (b.is_object())
          rp.largestAtPeak.push_back({b.value("name", ""),
                                      ir::parseBufferKind(b.value("kind", "")).value_or(ir::BufferKind::Activation),
                                      b.value("type", ""), b.value("size", std::int64_t{0})});
    plan.ranks.push_back(std::move(rp));
  }

  GRADC_TRY(buffers, array(j, root, "buffers"));
  for (size_t i = 0; i < buffers->size(); ++i) {
    const std::string path = "plan.buffers[" + std::to_string(i) + "]";
    const Json& e = (*buffers)[i];
    ir::PlannedBuffer b;
    GRADC_TRY(name, textField(e, path, "name"));
    GRADC_TRY(spec, textField(e, path, "spec_name"));
    GRADC_TRY(kind, textField(e, path, "kind"));
    GRADC_TRY(type, textField(e, path, "type", /*nullable=*/true));
    GRADC_TRY(size, integer(e, path, "size"));
    GRADC_TRY(offset, integer(e, path, "offset"));
    GRADC_TRY(first, integer(e, path, "first_step"));
    GRADC_TRY(last, integer(e, path, "last_step"));
    GRADC_TRY(producer, textField(e, path, "producer", /*nullable=*/true));
    if (size < 0 || offset < 0) return Error{path + ": size and offset must not be negative"};
    if (!ir::insideArena({offset, size, 0, 0}, arena))
      return Error{path + ".offset: " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                   " is not inside the arena of " + std::to_string(arena) + " bytes"};
    std::optional<ir::BufferKind> bufferKind = ir::parseBufferKind(kind);
    if (!bufferKind) return Error{path + ".kind: unknown buffer kind \"" + kind + "\""};
    b.kind = *bufferKind;
    GRADC_TRY(space, textField(e, path, "space"));
    std::optional<ir::MemorySpace> parsedSpace = ir::parseMemorySpace(space);
    if (!parsedSpace) return Error{path + ".space: unknown memory space \"" + space + "\""};
    b.space = *parsedSpace;
    GRADC_TRY(residency, textField(e, path, "residency"));
    std::optional<ir::Residency> parsedResidency = ir::parseResidency(residency);
    if (!parsedResidency)
      return Error{path + ".residency: expected \"persistent\" or \"step\", got \"" + residency + "\""};
    b.residency = *parsedResidency;
    if (b.workspace() && b.persistent()) return Error{path + ": a workspace cannot be persistent"};
    if (first < 0 || last < first || (steps > 0 && last >= steps))
      return Error{path + ": steps " + std::to_string(first) + ".." + std::to_string(last) +
                   " are not a range inside the timeline's " + std::to_string(steps) + " steps"};
    b.name = name;
    b.specName = spec;
    b.type = type;
    b.size = size;
    b.offset = offset;
    b.firstStep = static_cast<int>(first);
    b.lastStep = static_cast<int>(last);
    b.producer = producer;
    plan.buffers.push_back(std::move(b));
  }
  return plan;
}

#undef GRADC_TRY

}  // namespace gradc::runtime
