#include "ir/cost_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/op_table.h"

namespace gradc::ir {

const OpCost& CostTable::costOf(std::string_view op) const {
  auto it = ops.find(op);
  return it == ops.end() ? fallback : it->second;
}

double CostTable::nodeSeconds(const Node& node, int threads) const {
  std::vector<TensorType> inputs = node.operandTypes();
  std::vector<TensorType> results = node.resultTypes();
  const double bytes = static_cast<double>(opBytesAccessed(node.op(), inputs, node.attrs(), results, threads));
  return costOf(node.opName()).seconds(static_cast<double>(node.flops()), bytes) + perNodeOverhead;
}

double CostTable::stepSeconds(const Graph& graph) const {
  const int threads = graph.kernelThreads();
  double total = 0;
  for (const auto& n : graph.nodes()) total += nodeSeconds(*n, threads);
  return total;
}

namespace {

// Weighted least squares of the time beyond `dispatch` over the terms in `mask` (bit 1: per
// FLOP, 2: per byte); ok = false when singular or a coefficient is negative.
struct Fit {
  bool ok = false;
  OpCost cost;
  double residual = std::numeric_limits<double>::infinity();
};

Fit fitTerms(std::span<const CostSample> samples, unsigned mask, double dispatch) {
  std::vector<int> terms;
  for (int t = 0; t < 3; ++t)
    if (mask & (1u << t)) terms.push_back(t);
  const size_t n = terms.size();
  // Columns scaled to unit magnitude so the normal equations stay well conditioned.
  std::array<double, 3> scale{1, 1, 1};
  auto feature = [](const CostSample& s, int t) { return t == 0 ? 1.0 : t == 1 ? s.flops : s.bytes; };
  for (int t : terms) {
    double m = 0;
    for (const CostSample& s : samples) m = std::max(m, std::abs(feature(s, t)));
    scale[static_cast<size_t>(t)] = m > 0 ? m : 1;
  }
  double A[3][4] = {};
  for (const CostSample& s : samples) {
    const double w = s.calls;
    for (size_t i = 0; i < n; ++i) {
      const double xi = feature(s, terms[i]) / scale[static_cast<size_t>(terms[i])];
      for (size_t j = 0; j < n; ++j) A[i][j] += w * xi * feature(s, terms[j]) / scale[static_cast<size_t>(terms[j])];
      A[i][3] += w * xi * std::max(0.0, s.seconds - dispatch);
    }
  }
  // Gaussian elimination with partial pivoting.
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(A[r][c]) > std::abs(A[pivot][c])) pivot = r;
    if (std::abs(A[pivot][c]) < 1e-300) return {};
    for (size_t k = 0; k < 4; ++k) std::swap(A[c][k], A[pivot][k]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = A[r][c] / A[c][c];
      for (size_t k = c; k < 4; ++k) A[r][k] -= f * A[c][k];
    }
  }
  Fit fit;
  double coefficient[3] = {dispatch, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    coefficient[terms[i]] = A[i][3] / A[i][i] / scale[static_cast<size_t>(terms[i])];
    if (!(coefficient[terms[i]] >= 0)) return {};
  }
  fit.cost = OpCost{coefficient[0], coefficient[1], coefficient[2]};
  fit.residual = 0;
  for (const CostSample& s : samples) {
    const double e = fit.cost.seconds(s.flops, s.bytes) - s.seconds;
    fit.residual += s.calls * e * e;
  }
  fit.ok = true;
  return fit;
}

OpCost bestFit(std::span<const CostSample> samples, double dispatch) {
  Fit best;
  for (unsigned mask : {2u, 4u, 6u}) {
    Fit f = fitTerms(samples, mask, dispatch);
    if (f.ok && f.residual < best.residual) best = f;
  }
  return best.ok ? best.cost : OpCost{dispatch, 0, 0};
}

}  // namespace

CostTable fitCostTable(std::span<const CostSample> samples, double dispatchSeconds, int kernelThreads,
                       std::string source) {
  CostTable table;
  table.kernelThreads = kernelThreads;
  table.source = std::move(source);
  std::map<std::string, std::vector<CostSample>, std::less<>> byOp;
  for (const CostSample& s : samples) byOp[s.op].push_back(s);
  for (const auto& [op, list] : byOp) table.ops[op] = bestFit(list, dispatchSeconds);
  table.fallback = bestFit(samples, dispatchSeconds);
  return table;
}

}  // namespace gradc::ir
