#include "runtime/train/op_profile.h"

#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "ir/op_table.h"
#include "runtime/kernels/host_products.h"

namespace gradc::runtime {

namespace {

// Bytes one execution reads and writes: operands, results and declared workspace (for the
// intra-op threads the kernels ran with).
std::int64_t bytesAccessed(const ir::Node& node) {
  std::vector<ir::TensorType> inputs;
  for (const ir::Value* v : node.operands()) inputs.push_back(v->type());
  std::vector<ir::TensorType> results = node.resultTypes();
  return ir::opBytesAccessed(node.op(), inputs, node.attrs(), results, at::get_num_threads());
}

template <class F>
double bestSeconds(F f) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

MachinePeaks measureMachinePeaks() {
  MachinePeaks p;
  const std::int64_t n = 1024;
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n}), c = at::empty({n, n});
  at::mm_out(c, a, b);  // warm-up: OpenBLAS's buffers, the threads
  p.blasGemmGflops = 2.0 * n * n * n / bestSeconds([&] { at::mm_out(c, a, b); }) / 1e9;
  p.gemmOnTiles = largeProductsOnTiles() && hostProduct(c, a, b);
  p.gemmGflops = p.gemmOnTiles ? 2.0 * n * n * n / bestSeconds([&] { hostProduct(c, a, b); }) / 1e9 : p.blasGemmGflops;
  const std::int64_t elems = (64 << 20) / 4;
  at::Tensor src = at::ones({elems}), dst = at::empty({elems});
  dst.copy_(src);
  p.bandwidthGBs = 2.0 * 4 * static_cast<double>(elems) / bestSeconds([&] { dst.copy_(src); }) / 1e9;
  at::Tensor x = at::ones({64}), y = at::ones({64}), z = at::ones({64});
  double dispatch = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 2000; ++i) at::add_out(z, x, y);
    dispatch = std::min(dispatch, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 2000);
  }
  p.dispatchSeconds = dispatch;
  return p;
}

void OpProfile::add(const ir::Node& node, std::chrono::nanoseconds elapsed) {
  Entry& e = byNode_[&node];
  ++e.calls;
  e.ns += elapsed.count();
}

void OpProfile::addStep(double seconds) {
  ++steps_;
  stepSeconds_ += seconds;
}

ir::OpCost OpProfile::roofline(const MachinePeaks& peaks) {
  return ir::OpCost{peaks.dispatchSeconds, peaks.gemmGflops > 0 ? 1.0 / (peaks.gemmGflops * 1e9) : 0,
                    peaks.bandwidthGBs > 0 ? 1.0 / (peaks.bandwidthGBs * 1e9) : 0};
}

std::optional<ir::CostTable> OpProfile::costTable(const MachinePeaks& peaks, int threads, std::string source) const {
  std::vector<ir::CostSample> samples;
  std::int64_t kernelNs = 0, calls = 0;
  for (const auto& [node, e] : byNode_) {
    if (e.calls == 0) continue;
    samples.push_back({std::string(node->opName()), static_cast<double>(node->flops()),
                       static_cast<double>(bytesAccessed(*node)),
                       static_cast<double>(e.ns) / 1e9 / static_cast<double>(e.calls), static_cast<double>(e.calls)});
    kernelNs += e.ns;
    calls += e.calls;
  }
  if (samples.empty() || steps_ == 0) return std::nullopt;
  ir::CostTable table = ir::fitCostTable(samples, roofline(peaks), threads, std::move(source));
  if (calls > 0 && steps_ > 0)
    table.perNodeOverhead = std::max(0.0, stepSeconds_ - static_cast<double>(kernelNs) / 1e9) / static_cast<double>(calls);
  return table;
}

std::string OpProfile::format(int top, const MachinePeaks* peaks) const {
  std::map<std::string, Entry> byOp;  // "matmul (bwd)"
  for (const auto& [node, e] : byNode_) {
    Entry& agg = byOp[std::string(node->opName()) + " (" + std::string(ir::phaseName(node->phase())) + ")"];
    agg.calls += e.calls;
    agg.ns += e.ns;
    agg.flops += static_cast<double>(node->flops()) * static_cast<double>(e.calls);
    agg.bytes += static_cast<double>(bytesAccessed(*node)) * static_cast<double>(e.calls);
  }
  std::vector<std::pair<std::string, Entry>> rows(byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::int64_t kernelNs = 0;
  double stepFlops = 0;
  for (const auto& [name, e] : rows) {
    kernelNs += e.ns;
    stepFlops += e.flops;
  }
  const double steps = std::max<std::int64_t>(steps_, 1);
  stepFlops /= steps;
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "profile over %lld steps: %.1f ms per step, %.1f ms of it in kernels\n",
                static_cast<long long>(steps_), stepSeconds_ * 1e3 / steps, kernelNs / 1e6 / steps);
  out += line;
  if (peaks) {
    if (peaks->gemmOnTiles)
      std::snprintf(line, sizeof line,
                    "machine (probe): f32 GEMM %.1f GFLOP/s, memory %.1f GB/s (the GEMM on the tile kernels; "
                    "the BLAS's: %.1f GFLOP/s)\n",
                    peaks->gemmGflops, peaks->bandwidthGBs, peaks->blasGemmGflops);
    else
      std::snprintf(line, sizeof line, "machine (probe): f32 GEMM %.1f GFLOP/s, memory %.1f GB/s\n", peaks->gemmGflops,
                    peaks->bandwidthGBs);
    out += line;
    // The whole step's roofline: its FLOPs at the probe's GEMM rate are a lower bound on its time.
    if (peaks->gemmGflops > 0 && stepFlops > 0) {
      const double boundMs = stepFlops / (peaks->gemmGflops * 1e9) * 1e3, stepMs = stepSeconds_ * 1e3 / steps;
      std::snprintf(line, sizeof line,
                    "roofline: %.2f GFLOP per step, %.1f ms at the GEMM probe's rate; the step takes %.2fx that\n",
                    stepFlops / 1e9, boundMs, stepMs / boundMs);
      out += line;
    }
    std::snprintf(line, sizeof line, "  %-34s %10s %12s %8s %9s %7s %8s %7s\n", "op (phase)", "calls/step", "ms/step",
                  "share", "GFLOP/s", "%gemm", "GB/s", "%mem");
  } else {
    std::snprintf(line, sizeof line, "  %-34s %10s %12s %8s\n", "op (phase)", "calls/step", "ms/step", "share");
  }
  out += line;
  int shown = 0;
  for (const auto& [name, e] : rows) {
    if (shown++ == top) break;
    const double share = kernelNs > 0 ? 100.0 * static_cast<double>(e.ns) / static_cast<double>(kernelNs) : 0.0;
    if (peaks) {
      const double seconds = static_cast<double>(e.ns) / 1e9;
      const double gflops = seconds > 0 ? e.flops / seconds / 1e9 : 0, gbs = seconds > 0 ? e.bytes / seconds / 1e9 : 0;
      std::snprintf(line, sizeof line, "  %-34s %10.1f %12.2f %7.1f%% %9.2f %6.1f%% %8.2f %6.1f%%\n", name.c_str(),
                    e.calls / steps, e.ns / 1e6 / steps, share, gflops,
                    peaks->gemmGflops > 0 ? 100 * gflops / peaks->gemmGflops : 0, gbs,
                    peaks->bandwidthGBs > 0 ? 100 * gbs / peaks->bandwidthGBs : 0);
    } else {
      std::snprintf(line, sizeof line, "  %-34s %10.1f %12.2f %7.1f%%\n", name.c_str(), e.calls / steps,
                    e.ns / 1e6 / steps, share);
    }
    out += line;
  }
  if (static_cast<int>(rows.size()) > top) {
    std::snprintf(line, sizeof line, "  ... and %zu more op kinds\n", rows.size() - static_cast<size_t>(top));
    out += line;
  }
  return out;
}

}  // namespace gradc::runtime
