#include "ir/cost_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ir/attribute.h"
#include "ir/graph.h"
#include "ir/op_table.h"

namespace gradc::ir {

namespace {

// Collectives by how they run: one that starts communication and returns (the all-reduce's and
// reduce-scatter's starts), and one that waits for it or communicates blocking (their waits,
// the parameter all-gather, gather and scatter).
enum class CollectivePhase { None, Start, Blocking };

CollectivePhase phaseOf(std::string_view op) {
  const OpInfo* info = findOp(op);
  if (!info || info->collective == Collective::None) return CollectivePhase::None;
  return info->collective == Collective::AllReduceStart || info->collective == Collective::ReduceScatterStart
             ? CollectivePhase::Start
             : CollectivePhase::Blocking;
}

}  // namespace

const OpCost& CostTable::costOf(std::string_view op) const {
  auto it = ops.find(op);
  if (it != ops.end()) return it->second;
  // A collective the profile did not time is priced like the slowest (per byte) collective of
  // the same phase it did time: the interconnect, not the kernels, sets a collective's rate,
  // and the fallback (a fit over all kernels) would price it several times too cheap.
  const CollectivePhase phase = phaseOf(op);
  const OpCost* like = nullptr;
  if (phase != CollectivePhase::None)
    for (const auto& [name, cost] : ops)
      if (phaseOf(name) == phase && (!like || cost.perByte > like->perByte)) like = &cost;
  return like ? *like : fallback;
}

namespace {

double secondsWith(const CostTable& table, const Node& node, int threads, const AttrMap& attrs) {
  std::vector<TensorType> inputs = node.operandTypes();
  std::vector<TensorType> results = node.resultTypes();
  const double bytes = static_cast<double>(opBytesAccessed(node.op(), inputs, attrs, results, threads));
  const OpCost& cost = table.costOf(node.opName());
  const auto calls = static_cast<double>(std::max<std::int64_t>(getInt(attrs, "chunks").value_or(1), 1));
  return cost.seconds(static_cast<double>(node.flops()), bytes) + (calls - 1) * cost.perCall + table.perNodeOverhead;
}

}  // namespace

double CostTable::nodeSeconds(const Node& node, int threads) const {
  return secondsWith(*this, node, threads, node.attrs());
}

double CostTable::nodeSeconds(const Node& node, int threads, std::int64_t chunks) const {
  AttrMap attrs = node.attrs();
  attrs["chunks"] = chunks;
  return secondsWith(*this, node, threads, attrs);
}

double CostTable::stepSeconds(const Graph& graph) const {
  const int threads = graph.kernelThreads();
  double total = 0;
  for (const auto& n : graph.nodes()) total += nodeSeconds(*n, threads);
  return total;
}

namespace {

// Weighted least squares of the time beyond `dispatch` over the terms in `mask` (bit 0: a
// constant, 1: per FLOP, 2: per byte); ok = false when singular or a coefficient is negative.
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
  double diagonal = 0;
  for (size_t i = 0; i < n; ++i) diagonal = std::max(diagonal, A[i][i]);
  // Gaussian elimination with partial pivoting.
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(A[r][c]) > std::abs(A[pivot][c])) pivot = r;
    if (!(std::abs(A[pivot][c]) > 1e-9 * diagonal)) return {};  // (nearly) dependent columns
    for (size_t k = 0; k < 4; ++k) std::swap(A[c][k], A[pivot][k]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = A[r][c] / A[c][c];
      for (size_t k = c; k < 4; ++k) A[r][k] -= f * A[c][k];
    }
  }
  Fit fit;
  double coefficient[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    coefficient[terms[i]] = A[i][3] / A[i][i] / scale[static_cast<size_t>(terms[i])];
    if (!(coefficient[terms[i]] >= 0)) return {};
  }
  coefficient[0] += dispatch;  // the fitted constant is beyond the dispatch time
  fit.cost = OpCost{coefficient[0], coefficient[1], coefficient[2]};
  fit.residual = 0;
  for (const CostSample& s : samples) {
    const double e = fit.cost.seconds(s.flops, s.bytes) - s.seconds;
    fit.residual += s.calls * e * e;
  }
  fit.ok = true;
  return fit;
}

// Whether the samples' sizes span a factor of two (a constant per call is then identifiable).
bool spansSizes(std::span<const CostSample> samples) {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const CostSample& s : samples) {
    const double size = std::max(s.flops, s.bytes);
    lo = std::min(lo, size);
    hi = std::max(hi, size);
  }
  return hi > 0 && hi >= 2 * lo;
}

// Whether FLOPs and bytes rise together over the samples (correlation above 0.99, or one of
// them constant): least squares cannot tell their coefficients apart.
bool collinear(std::span<const CostSample> samples) {
  double w = 0, mf = 0, mb = 0;
  for (const CostSample& s : samples) {
    w += s.calls;
    mf += s.calls * s.flops;
    mb += s.calls * s.bytes;
  }
  if (w <= 0) return true;
  mf /= w;
  mb /= w;
  double vf = 0, vb = 0, cov = 0;
  for (const CostSample& s : samples) {
    vf += s.calls * (s.flops - mf) * (s.flops - mf);
    vb += s.calls * (s.bytes - mb) * (s.bytes - mb);
    cov += s.calls * (s.flops - mf) * (s.bytes - mb);
  }
  if (vf <= 1e-12 * mf * mf * w || vb <= 1e-12 * mb * mb * w) return true;
  return cov / std::sqrt(vf * vb) > 0.99;
}

OpCost bestFit(std::span<const CostSample> samples, const OpCost& roofline) {
  const double dispatch = roofline.perCall;
  std::vector<unsigned> masks;
  if (collinear(samples)) {
    // The binding resource by the roofline, at the samples' total work.
    double flops = 0, bytes = 0;
    for (const CostSample& s : samples) {
      flops += s.calls * s.flops;
      bytes += s.calls * s.bytes;
    }
    masks.push_back(flops * roofline.perFlop >= bytes * roofline.perByte ? 2u : 4u);
  } else {
    masks = {2u, 4u, 6u};
  }
  if (spansSizes(samples)) {
    const size_t plain = masks.size();
    for (size_t i = 0; i < plain; ++i) masks.push_back(masks[i] | 1u);
  }
  Fit best;
  for (unsigned mask : masks) {
    Fit f = fitTerms(samples, mask, dispatch);
    if (f.ok && f.residual < best.residual) best = f;
  }
  return best.ok ? best.cost : OpCost{dispatch, 0, 0};
}

}  // namespace

CostTable fitCostTable(std::span<const CostSample> samples, const OpCost& roofline, int kernelThreads,
                       std::string source) {
  CostTable table;
  table.kernelThreads = kernelThreads;
  table.source = std::move(source);
  std::map<std::string, std::vector<CostSample>, std::less<>> byOp;
  for (const CostSample& s : samples) byOp[s.op].push_back(s);
  for (const auto& [op, list] : byOp) table.ops[op] = bestFit(list, roofline);
  table.fallback = bestFit(samples, roofline);
  return table;
}

}  // namespace gradc::ir
