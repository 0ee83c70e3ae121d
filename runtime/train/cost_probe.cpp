#include "runtime/train/cost_probe.h"

#include <ATen/Parallel.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "runtime/io/atomic_file.h"
#include "runtime/core/json_text.h"
#include "runtime/train/op_profile.h"

namespace gradc::runtime {

namespace {

constexpr const char* kFormat = "gradc-cost-table";

nlohmann::json costJson(const ir::OpCost& c) {
  return {{"per_call_s", c.perCall}, {"per_flop_s", c.perFlop}, {"per_byte_s", c.perByte}};
}

Expected<ir::OpCost> costFrom(const nlohmann::json& j, const std::string& where) {
  ir::OpCost c;
  try {
    c.perCall = j.at("per_call_s").get<double>();
    c.perFlop = j.at("per_flop_s").get<double>();
    c.perByte = j.at("per_byte_s").get<double>();
  } catch (const nlohmann::json::exception&) {
    return Error{where + " needs the numbers per_call_s, per_flop_s and per_byte_s"};
  }
  if (!(c.perCall >= 0 && c.perFlop >= 0 && c.perByte >= 0 && c.perCall < 1e3 && c.perFlop < 1 && c.perByte < 1))
    return Error{where + " has a negative or implausible coefficient"};
  return c;
}

}  // namespace

ir::CostTable probeCostTable(int threads) {
  const int before = at::get_num_threads();
  at::set_num_threads(std::max(threads, 1));
  const MachinePeaks peaks = measureMachinePeaks();
  at::set_num_threads(before);
  ir::CostTable t;
  t.kernelThreads = std::max(threads, 1);
  t.source = "probe";
  t.fallback = OpProfile::roofline(peaks);
  return t;
}

std::string costTableToJson(const ir::CostTable& table) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [name, cost] : table.ops) ops[name] = costJson(cost);
  nlohmann::json j = {{"format", kFormat},
                      {"version", 1},
                      {"kernel_threads", table.kernelThreads},
                      {"source", table.source},
                      {"per_node_overhead_s", table.perNodeOverhead},
                      {"fallback", costJson(table.fallback)},
                      {"ops", ops}};
  return j.dump(1) + "\n";
}

Status writeCostTable(const std::filesystem::path& path, const OpProfile& profile, const MachinePeaks& peaks,
                      std::string source) {
  const std::optional<ir::CostTable> table = profile.costTable(peaks, at::get_num_threads(), std::move(source));
  if (!table)
    return Error{"--cost-table-out: no step was timed (the first step of a run is not profiled): train 2 steps or more"};
  if (Status s = writeFileAtomic(path, costTableToJson(*table)); !s)
    return Error{"--cost-table-out: " + s.message(), ErrorKind::Environment};
  return Status::success();
}

Expected<ir::CostTable> readCostTable(const std::filesystem::path& path) {
  Expected<std::string> text = readFile(path);
  if (!text) return Error{"--cost-table " + path.string() + ": " + text.error().message};
  const nlohmann::json j = parseJsonBounded(*text);
  const std::string where = "--cost-table " + path.string();
  if (j.is_discarded() || !j.is_object() || j.value("format", std::string()) != kFormat)
    return Error{where + ": not a gradc cost table (write one with gradc train --profile --cost-table-out FILE)"};
  ir::CostTable t;
  try {
    t.kernelThreads = j.at("kernel_threads").get<int>();
    t.source = j.at("source").get<std::string>();
    t.perNodeOverhead = j.at("per_node_overhead_s").get<double>();
  } catch (const nlohmann::json::exception&) {
    return Error{where + ": kernel_threads, source and per_node_overhead_s are required"};
  }
  if (t.kernelThreads < 1 || !(t.perNodeOverhead >= 0 && t.perNodeOverhead < 1e3))
    return Error{where + ": kernel_threads or per_node_overhead_s is out of range"};
  Expected<ir::OpCost> fallback = costFrom(j.value("fallback", nlohmann::json()), where + ": \"fallback\"");
  if (!fallback) return fallback.error();
  t.fallback = *fallback;
  const nlohmann::json ops = j.value("ops", nlohmann::json::object());
  if (!ops.is_object()) return Error{where + ": \"ops\" must be an object"};
  for (const auto& [name, cost] : ops.items()) {
    Expected<ir::OpCost> c = costFrom(cost, where + ": op '" + name + "'");
    if (!c) return c.error();
    t.ops[name] = *c;
  }
  return t;
}

}  // namespace gradc::runtime
