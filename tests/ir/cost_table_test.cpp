// The step-time cost table (ir/cost_table.h): the per-kind least-squares fit recovers known
// coefficients (a constant too when sizes vary), never fits a negative one, and a kind whose
// samples share one size scales with the size along the roofline's binding term.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ir/cost_table.h"

namespace gradc {
namespace {

// Relative closeness for coefficients around 1e-11 (doctest's Approx is absolute there).
bool near(double got, double want, double tolerance = 1e-6) {
  return want == 0 ? got == 0 : std::abs(got / want - 1) <= tolerance;
}

TEST_CASE("cost table: the fit recovers each kind's per-FLOP and per-byte times and its constant") {
  const double dispatch = 2e-6;
  const ir::OpCost roofline{dispatch, 1e-11, 1e-10};
  std::vector<ir::CostSample> samples;
  for (int i = 1; i <= 6; ++i) {
    const double flops = 1e6 * i * i, bytes = 3e5 * (7 - i);
    samples.push_back({"matmul", flops, bytes, dispatch + 2e-11 * flops + 5e-11 * bytes, 1});
    samples.push_back({"relu", flops / 100, bytes, dispatch + 3e-6 + 8e-11 * bytes, 2});
  }
  const ir::CostTable t = ir::fitCostTable(samples, roofline, 2, "test");
  CHECK(t.kernelThreads == 2);
  const ir::OpCost& mm = t.costOf("matmul");
  CHECK(near(mm.perCall, dispatch, 1e-3));
  CHECK(near(mm.perFlop, 2e-11));
  CHECK(near(mm.perByte, 5e-11));
  const ir::OpCost& relu = t.costOf("relu");
  CHECK(near(relu.perCall, dispatch + 3e-6, 1e-3));
  CHECK(relu.perFlop < 1e-16);
  CHECK(near(relu.perByte, 8e-11, 1e-4));
  // A kind the samples lack gets the fallback, fitted over all of them: non-negative.
  const ir::OpCost& other = t.costOf("softmax");
  CHECK(other.perFlop >= 0);
  CHECK(other.perByte >= 0);
  CHECK(other.seconds(1e6, 1e6) > dispatch);
}

TEST_CASE("cost table: one size per kind scales along the roofline's binding term; zero work costs dispatch") {
  const ir::OpCost roofline{1e-6, 1e-11, 1e-10};
  // add: 1e6 FLOPs and 1.2e7 bytes -- memory-bound by the roofline (1.2e-3 s vs 1e-5 s).
  // mm: 1e9 FLOPs and 1e6 bytes at slightly different sizes with noise -- compute-bound.
  std::vector<ir::CostSample> samples{{"add", 1e6, 1.2e7, 1e-3 + 1e-6, 5},
                                      {"add", 1e6, 1.2e7, 1e-3 + 1e-6, 5},
                                      {"mm", 1.00e9, 1.00e6, 2.00e-2, 1},
                                      {"mm", 1.01e9, 1.01e6, 1.98e-2, 1},
                                      {"mm", 0.99e9, 0.99e6, 2.03e-2, 1},
                                      {"view", 0, 0, 1e-7, 3}};
  const ir::CostTable t = ir::fitCostTable(samples, roofline, 1, "test");
  const ir::OpCost& add = t.costOf("add");
  CHECK(add.perFlop == 0);
  CHECK(near(add.seconds(1e6, 1.2e7), 1e-3 + 1e-6));
  // Twice the work: twice the time beyond dispatch (the batch the planner asks about).
  CHECK(near(add.seconds(2e6, 2.4e7) - 1e-6, 2e-3));
  const ir::OpCost& mm = t.costOf("mm");
  CHECK(mm.perByte == 0);
  CHECK(near(mm.perFlop, 2e-11, 0.02));
  CHECK(near(mm.perCall, 1e-6));
  const ir::OpCost& view = t.costOf("view");
  CHECK(view.perFlop == 0);
  CHECK(view.perByte == 0);
  CHECK(near(view.perCall, 1e-6));
}

}  // namespace
}  // namespace gradc

namespace gradc {
namespace {

TEST_CASE("cost table: a collective the profile did not time is priced like a timed one of its phase") {
  const ir::OpCost roofline{1e-6, 1e-11, 1e-10};
  std::vector<ir::CostSample> samples;
  for (int i = 1; i <= 4; ++i) {
    samples.push_back({"relu", 1e4 * i, 1e6 * i, 1e-6 + 1e-10 * 1e6 * i, 1});
    samples.push_back({"all_reduce_start", 0, 2e6 * i, 1e-6 + 5e-11 * 2e6 * i, 1});
    samples.push_back({"all_reduce_wait", 0, 2e6 * i, 1e-6 + 8e-10 * 2e6 * i, 1});
  }
  const ir::CostTable t = ir::fitCostTable(samples, roofline, 1, "test");
  // The reduce-scatter's start and wait, and the blocking all-gather, take the all-reduce's.
  CHECK(&t.costOf("reduce_scatter_start") == &t.costOf("all_reduce_start"));
  CHECK(&t.costOf("reduce_scatter_wait") == &t.costOf("all_reduce_wait"));
  CHECK(&t.costOf("all_gather_params") == &t.costOf("all_reduce_wait"));
  // Any other kind the run lacked takes the fallback; a table without collectives, too.
  CHECK(&t.costOf("gelu") == &t.fallback);
  const ir::CostTable kernelsOnly = ir::fitCostTable(std::vector<ir::CostSample>(samples.begin(), samples.begin() + 1),
                                                     roofline, 1, "test");
  CHECK(&kernelsOnly.costOf("reduce_scatter_wait") == &kernelsOnly.fallback);
}

}  // namespace
}  // namespace gradc
