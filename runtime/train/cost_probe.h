// Step-time cost tables for the throughput objective (ir/cost_table.h): measured by a probe
// of this machine, or fitted from a training run's kernel times (`gradc train --profile
// --cost-table-out FILE`, OpProfile::costTable), and stored as JSON for the planner
// (`--objective throughput --cost-table FILE`).
#pragma once

#include <filesystem>
#include <string>

#include "ir/cost_table.h"
#include "ir/status.h"
#include "runtime/train/op_profile.h"

namespace gradc::runtime {

// The probe (under a second): f32 GEMM rate, memory bandwidth and the time of one small kernel
// call (measureMachinePeaks), with `threads` intra-op threads: every op kind gets
// dispatch + FLOPs / GEMM rate + bytes / bandwidth.
ir::CostTable probeCostTable(int threads);

// {"format": "gradc-cost-table", "version": 1, "kernel_threads", "source", "per_node_overhead_s",
//  "fallback": {"per_call_s", "per_flop_s", "per_byte_s"}, "ops": {NAME: {...}}}
std::string costTableToJson(const ir::CostTable& table);
// The table fitted from `profile` (OpProfile::costTable, with the current intra-op threads),
// written atomically to `path`; an Error when no step was timed or the write fails.
Status writeCostTable(const std::filesystem::path& path, const OpProfile& profile, const MachinePeaks& peaks,
                      std::string source);
Expected<ir::CostTable> readCostTable(const std::filesystem::path& path);

}  // namespace gradc::runtime
