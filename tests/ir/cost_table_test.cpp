// The step-time cost table (ir/cost_table.h): the per-kind least-squares fit recovers known
// coefficients, never fits a negative one, and scales with the size of a kind whose samples all
// share one size (no per-kind constant).
#include <doctest/doctest.h>

#include <vector>

#include "ir/cost_table.h"

namespace gradc {
namespace {

TEST_CASE("cost table: the fit recovers each kind's per-FLOP and per-byte times beyond the dispatch time") {
  const double dispatch = 2e-6;
  std::vector<ir::CostSample> samples;
  for (int i = 1; i <= 6; ++i) {
    const double flops = 1e6 * i * i, bytes = 3e5 * (7 - i);
    samples.push_back({"matmul", flops, bytes, dispatch + 2e-11 * flops + 5e-11 * bytes, 1});
    samples.push_back({"relu", flops / 100, bytes, dispatch + 8e-11 * bytes, 2});
  }
  const ir::CostTable t = ir::fitCostTable(samples, dispatch, 2, "test");
  CHECK(t.kernelThreads == 2);
  const ir::OpCost& mm = t.costOf("matmul");
  CHECK(mm.perCall == doctest::Approx(dispatch));
  CHECK(mm.perFlop == doctest::Approx(2e-11).epsilon(1e-6));
  CHECK(mm.perByte == doctest::Approx(5e-11).epsilon(1e-6));
  const ir::OpCost& relu = t.costOf("relu");
  CHECK(relu.perFlop == doctest::Approx(0).epsilon(1e-9));
  CHECK(relu.perByte == doctest::Approx(8e-11).epsilon(1e-6));
  // A kind the samples lack gets the fallback, fitted over all of them: non-negative.
  const ir::OpCost& other = t.costOf("softmax");
  CHECK(other.perFlop >= 0);
  CHECK(other.perByte >= 0);
  CHECK(other.seconds(1e6, 1e6) > dispatch);
}

TEST_CASE("cost table: one size per kind still scales with the size, and a time below dispatch fits to zero") {
  std::vector<ir::CostSample> samples{{"add", 1e6, 1.2e7, 1e-3 + 1e-6, 5}, {"add", 1e6, 1.2e7, 1e-3 + 1e-6, 5},
                                      {"view", 0, 0, 1e-7, 3}};
  const ir::CostTable t = ir::fitCostTable(samples, 1e-6, 1, "test");
  const ir::OpCost& add = t.costOf("add");
  CHECK(add.seconds(1e6, 1.2e7) == doctest::Approx(1e-3 + 1e-6));
  // Twice the work: about twice the time beyond dispatch (the batch the planner asks about).
  CHECK(add.seconds(2e6, 2.4e7) - 1e-6 == doctest::Approx(2e-3));
  const ir::OpCost& view = t.costOf("view");
  CHECK(view.perFlop == 0);
  CHECK(view.perByte == 0);
  CHECK(view.perCall == doctest::Approx(1e-6));
}

}  // namespace
}  // namespace gradc
