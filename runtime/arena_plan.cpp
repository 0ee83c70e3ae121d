#include "runtime/arena_plan.h"

#include "ir/arena_overlap.h"
#include "runtime/json_text.h"

#include <nlohmann/json.hpp>

namespace gradc::runtime {
namespace {

using Json = nlohmann::json;

Expected<std::int64_t> integer(const Json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end()) return Error{where + key + ": missing"};
  if (!it->is_number_integer()) return Error{where + key + ": expected an integer"};
  return it->get<std::int64_t>();
}

}  // namespace

Expected<ArenaPlan> arenaPlanFromJson(std::string_view text) {
  if (std::string deep = jsonNestingError(text); !deep.empty()) return Error{deep};
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{"not a JSON object"};
  if (j.value("format", "") != "gradc-memory-plan") return Error{"format: expected \"gradc-memory-plan\""};
  ArenaPlan plan;
  Expected<std::int64_t> arena = integer(j, "arena_bytes", "");
  if (!arena) return arena.error();
  Expected<std::int64_t> peak = integer(j, "peak_bytes", "");
  if (!peak) return peak.error();
  if (*arena < 0 || *peak < 0) return Error{"arena_bytes and peak_bytes must not be negative"};
  plan.arenaBytes = *arena;
  plan.peakBytes = *peak;
  if (auto budget = j.find("budget_bytes"); budget != j.end() && !budget->is_null()) {
    if (!budget->is_number_integer() || budget->get<std::int64_t>() <= 0)
      return Error{"budget_bytes: expected a positive integer or null"};
    plan.budgetBytes = budget->get<std::int64_t>();
  }
  if (auto reserve = j.find("reserve_bytes"); reserve != j.end()) {
    if (!reserve->is_number_integer() || reserve->get<std::int64_t>() < 0)
      return Error{"reserve_bytes: expected a non-negative integer"};
    plan.reserveBytes = reserve->get<std::int64_t>();
  }
  auto steps = j.find("steps");
  if (steps == j.end() || !steps->is_array()) return Error{"steps: expected an array"};
  plan.steps = static_cast<int>(steps->size());
  auto buffers = j.find("buffers");
  if (buffers == j.end() || !buffers->is_array()) return Error{"buffers: expected an array"};
  for (size_t i = 0; i < buffers->size(); ++i) {
    const Json& b = (*buffers)[i];
    const std::string where = "buffers[" + std::to_string(i) + "].";
    if (!b.is_object()) return Error{"buffers[" + std::to_string(i) + "]: expected an object"};
    ArenaBuffer buffer;
    if (!b.contains("name") || !b["name"].is_string()) return Error{where + "name: expected a string"};
    if (!b.contains("kind") || !b["kind"].is_string()) return Error{where + "kind: expected a string"};
    buffer.name = b["name"];
    buffer.kind = b["kind"];
    Expected<std::int64_t> size = integer(b, "size", where), offset = integer(b, "offset", where),
                           first = integer(b, "first_step", where), last = integer(b, "last_step", where);
    for (const auto* e : {&size, &offset, &first, &last})
      if (!*e) return e->error();
    if (!ir::insideArena({*offset, *size, 0, 0}, plan.arenaBytes))
      return Error{where + "offset: " + std::to_string(*size) + " bytes at offset " + std::to_string(*offset) +
                   " is not inside the arena of " + std::to_string(plan.arenaBytes) + " bytes"};
    if (*first < 0 || *last < *first || (plan.steps > 0 && *last >= plan.steps))
      return Error{where + "first_step/last_step: [" + std::to_string(*first) + ", " + std::to_string(*last) +
                   "] is not an interval of the plan's " + std::to_string(plan.steps) + " steps"};
    buffer.size = *size;
    buffer.offset = *offset;
    buffer.firstStep = static_cast<int>(*first);
    buffer.lastStep = static_cast<int>(*last);
    plan.buffers.push_back(std::move(buffer));
  }
  return plan;
}

}  // namespace gradc::runtime
