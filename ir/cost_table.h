// Predicted kernel time, per op kind: what the throughput objective (passes/plan/objective.h)
// weighs plans by. Each op kind k has a linear model of one call,
//
//     seconds = perCall_k + perFlop_k x FLOPs + perByte_k x bytes accessed
//
// (FLOPs and bytes from the op table, bytes for the plan's intra-op threads), and every node
// also costs perNodeOverhead (the executor's work between kernels). A step's time is the sum
// over its nodes: the runtime runs one kernel at a time, so the sum is the model.
//
// Tables come from two sources (runtime/train/cost_probe.h):
//   - a profile: `gradc train --profile --cost-table-out FILE` times every kernel call of a real
//     run and fits each op kind by non-negative least squares over its nodes (fitCostTable: the
//     best fit over the subsets of terms whose coefficients come out >= 0). perCall starts at
//     the machine's dispatch time (one tiny kernel call, measured); a kind's own constant
//     beyond it is fitted only when its nodes' sizes span a factor of two or more, since a
//     constant fitted on one size would not grow with the batch the planner asks about. When
//     a kind's FLOPs and bytes rise together (one size, or one shape family: the two columns
//     nearly collinear, correlation above 0.99), the data cannot tell them apart, and the
//     term the probe's roofline says binds (FLOPs x per-FLOP vs bytes x per-byte of
//     `roofline`) is fitted alone. Kinds the run did not have use the fallback, fitted the
//     same way over every node, except collectives: one the run did not time (a ZeRO
//     reduce-scatter when the profile ran replicated) takes the cost of the slowest collective
//     it did time of the same phase (a start, or a wait / blocking call). On a ring a
//     reduce-scatter or an all-gather moves about half an all-reduce's bytes, so this prices
//     them up to 2x high rather than at the kernels' rate;
//   - a probe: the machine's GEMM rate, memory bandwidth and per-call dispatch time, measured in
//     about a second, as the fallback for every kind (a roofline summed, not maxed).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>

namespace gradc::ir {

class Graph;
class Node;

struct OpCost {
  double perCall = 0;  // seconds
  double perFlop = 0;  // seconds per FLOP
  double perByte = 0;  // seconds per byte accessed
  double seconds(double flops, double bytes) const { return perCall + perFlop * flops + perByte * bytes; }
};

// A node whose kernel runs in chunks (attribute `chunks`: the fused LM-head loss) makes one
// call per chunk.
struct CostTable {
  int kernelThreads = 1;            // the threads the times were measured with
  std::string source;               // "probe", or "profile of MODEL at batch B"
  std::map<std::string, OpCost, std::less<>> ops;  // by op name (ir::OpInfo::name)
  OpCost fallback;                  // kinds not in `ops`
  double perNodeOverhead = 0;       // seconds between kernels, per node

  const OpCost& costOf(std::string_view op) const;
  double nodeSeconds(const Node& node, int kernelThreads) const;
  // The same node run in `chunks` chunks (its workspace and calls at that count).
  double nodeSeconds(const Node& node, int kernelThreads, std::int64_t chunks) const;
  // The sum over the graph's nodes (with the graph's kernel threads for bytes).
  double stepSeconds(const Graph& graph) const;
};

// One timed kernel call of a profile.
struct CostSample {
  std::string op;
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
  double calls = 1;  // weight: how many calls the sample's time averages
};

// The per-kind fits described above; `roofline` (the probe's dispatch, per-FLOP and per-byte
// times) gives the dispatch time and decides collinear kinds. `fallback` is the fit over all
// samples.
CostTable fitCostTable(std::span<const CostSample> samples, const OpCost& roofline, int kernelThreads,
                       std::string source);

}  // namespace gradc::ir
