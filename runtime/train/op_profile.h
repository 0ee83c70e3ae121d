// Time per op kind over a training run (`gradc train --profile`): where a step's time goes,
// aggregated like torch.profiler's key_averages. Fed by the executor's node hook, which times
// each kernel call alone (not the executor's bookkeeping between nodes). The nodes must outlive
// the profile.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <string>

#include "ir/cost_table.h"
#include "ir/graph.h"

namespace gradc::runtime {

// What this machine's cores reach, measured by a short probe (about 0.1-0.5 s): f32 GEMM
// throughput (1024 x 1024 x 1024, best of 3) and memory bandwidth (a 64 MiB copy, read plus
// write, best of 3), with the current intra-op threads. The roofline's ceilings. The GEMM is
// the one the host's linear and matmul kernels run at that size (the tile kernels where
// runtime/kernels/host_products.h takes large products, else the BLAS's at::mm); the BLAS's
// own rate is measured beside it.
struct MachinePeaks {
  double gemmGflops = 0;
  double blasGemmGflops = 0;  // at::mm's rate (the same as gemmGflops when the BLAS runs them)
  bool gemmOnTiles = false;   // gemmGflops is the tile kernels' rate
  double bandwidthGBs = 0;
  double dispatchSeconds = 0;  // one small kernel call (an add of 64 floats, best of 5 x 2000)
};
MachinePeaks measureMachinePeaks();

class OpProfile {
 public:
  void add(const ir::Node& node, std::chrono::nanoseconds elapsed);
  // Call once per step, with the step's wall time.
  void addStep(double seconds);

  // A table, slowest op kind first: calls per step, ms per step, share of the kernels' time, and
  // the share of the step spent outside kernels (the executor, data, metrics). With `peaks`, a
  // roofline too: each op kind's achieved GFLOP/s (the op table's FLOP counts) and GB/s (bytes
  // of operands, results and workspace), and their fractions of the machine's GEMM peak and
  // memory bandwidth.
  std::string format(int top = 20, const MachinePeaks* peaks = nullptr) const;

  // Each op kind's kernel time fitted over its nodes (ir::fitCostTable: one sample per node,
  // its mean time per call; `peaks` the roofline), and the executor's time between kernels
  // spread over the nodes. Empty when no step was profiled.
  std::optional<ir::CostTable> costTable(const MachinePeaks& peaks, int threads, std::string source) const;
  // The probe's dispatch, per-FLOP and per-byte times.
  static ir::OpCost roofline(const MachinePeaks& peaks);

 private:
  struct Entry {
    std::int64_t calls = 0;
    std::int64_t ns = 0;
    double flops = 0;  // filled when aggregated by op kind
    double bytes = 0;
  };
  std::unordered_map<const ir::Node*, Entry> byNode_;  // aggregated by op kind when formatted
  std::int64_t steps_ = 0;
  double stepSeconds_ = 0;
};

}  // namespace gradc::runtime
