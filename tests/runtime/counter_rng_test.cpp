// The counter-based RNG and the dropout kernel built on it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "runtime/cuda/philox_element.h"
#include "runtime/core/counter_rng.h"
#include "runtime/exec/executor.h"

// doctest last: c10 includes glog, whose CHECK would otherwise replace doctest's and abort
// instead of recording the failure.
#undef CHECK
#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;

namespace {

at::Tensor dropout(const at::Tensor& x, double p, std::int64_t rng, RunContext ctx) {
  Expected<std::vector<at::Tensor>> r =
      callOp("dropout", std::vector<at::Tensor>{x}, {{"p", p}, {"rng", rng}}, ctx);
  if (!r) FAIL(r.error().message);
  return (*r)[0];
}

}  // namespace

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors") {
  using C = PhiloxCounter;
  CHECK((philox4x32({0, 0, 0, 0}, {0, 0}) == C{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  CHECK((philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}) ==
         C{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  CHECK((philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}) ==
         C{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST_CASE("the element function the CUDA dropout kernel draws with is the CPU generator, bit for bit") {
  for (const RngStream rng : {RngStream{.seed = 0, .step = 1, .stream = 0}, RngStream{.seed = 42, .step = 7, .stream = 3},
                              RngStream{.seed = ~0ull, .step = (std::int64_t{1} << 40) + 3, .stream = 123456789}}) {
    const PhiloxKey key = philoxKey(rng);
    for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4},
                           std::int64_t{1001}, (std::int64_t{1} << 33) + 5}) {
      CAPTURE(i);
      const float gpu = philox::uniform(static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(rng.step), key[0], key[1]);
      CHECK(gpu == uniformAt(rng, i));
    }
  }
}

TEST_CASE("uniformFloats agrees with uniformAt however the range is split") {
  RngStream rng{.seed = 42, .step = 7, .stream = 3};
  const std::int64_t first = 13, n = 1000;
  std::vector<float> whole(n);
  uniformFloats(rng, first, n, whole.data());
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(whole[i] == uniformAt(rng, first + i));
  // Ragged pieces (odd offsets, lengths shorter and longer than one batch).
  std::vector<float> pieces(n);
  std::int64_t done = 0;
  for (std::int64_t len : {1, 2, 3, 5, 64, 65, 127, 200, 533}) {
    uniformFloats(rng, first + done, len, pieces.data() + done);
    done += len;
  }
  REQUIRE(done == n);
  CHECK(pieces == whole);
  for (float u : whole) {
    CHECK(u >= 0.0f);
    CHECK(u < 1.0f);
  }
}

TEST_CASE("uniforms look uniform") {
  RngStream rng{.seed = 1, .step = 1, .stream = 0};
  const std::int64_t n = 1 << 20;
  std::vector<float> u(n);
  uniformFloats(rng, 0, n, u.data());
  std::vector<std::int64_t> bins(16, 0);
  double sum = 0;
  for (float x : u) {
    bins[static_cast<size_t>(x * 16)]++;
    sum += x;
  }
  // Mean: sd of the mean is sqrt(1/12/n) ~ 2.8e-4; allow 5 sd.
  CHECK(std::abs(sum / n - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
  // Each bin: binomial(n, 1/16), sd ~ 242; allow 5 sd.
  const double expected = n / 16.0, sd = std::sqrt(n * (1.0 / 16) * (15.0 / 16));
  for (std::int64_t b : bins) CHECK(std::abs(b - expected) < 5 * sd);
}

TEST_CASE("dropout: deterministic per key, different across keys, steps and seeds") {
  at::Tensor x = at::randn({64, 1000});
  RunContext ctx{.seed = 5, .step = 3};
  at::Tensor a = dropout(x, 0.25, 7, ctx);
  at::Tensor b = dropout(x, 0.25, 7, ctx);
  CHECK(at::equal(a, b));
  CHECK(!at::equal(a, dropout(x, 0.25, 8, ctx)));
  CHECK(!at::equal(a, dropout(x, 0.25, 7, RunContext{.seed = 5, .step = 4})));
  CHECK(!at::equal(a, dropout(x, 0.25, 7, RunContext{.seed = 6, .step = 3})));
  // Masks of different keys are uncorrelated: they agree on about p^2 + (1-p)^2 of elements.
  at::Tensor keepA = a != 0, keepB = dropout(x, 0.25, 8, ctx) != 0;
  double agree = keepA.eq(keepB).to(at::kDouble).mean().item<double>();
  CHECK(agree == doctest::Approx(0.25 * 0.25 + 0.75 * 0.75).epsilon(0.01));
}

TEST_CASE("dropout: the same mask whatever the thread count") {
  at::Tensor x = at::randn({1 << 20});
  RunContext ctx{.seed = 11, .step = 2};
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  at::Tensor single = dropout(x, 0.1, 1, ctx);
  at::set_num_threads(std::max(threads, 4));
  at::Tensor multi = dropout(x, 0.1, 1, ctx);
  at::set_num_threads(threads);
  CHECK(at::equal(single, multi));
}

TEST_CASE("dropout: keep rate, scaling, and the mask is the definition") {
  const double p = 0.1;
  const std::int64_t n = 1 << 20;
  at::Tensor x = at::rand({n}) + 0.5;  // no zeros, so zeros in the output mark dropped elements
  RunContext ctx{.seed = 3, .step = 9};
  at::Tensor y = dropout(x, p, 4, ctx);
  at::Tensor kept = y != 0;
  double rate = kept.to(at::kDouble).mean().item<double>();
  // Binomial sd of the rate: sqrt(p (1 - p) / n) ~ 2.9e-4; allow 5 sd.
  MESSAGE("keep rate " << rate << " (expected " << 1 - p << ")");
  CHECK(std::abs(rate - (1 - p)) < 5 * std::sqrt(p * (1 - p) / n));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  CHECK(at::equal(y.masked_select(kept), x.masked_select(kept) * scale));
  // Element i is kept iff its uniform is >= p.
  RngStream rng{.seed = 3, .step = 9, .stream = 4};
  auto keptAcc = kept.accessor<bool, 1>();
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4},
                         std::int64_t{1000}, std::int64_t{4095}, std::int64_t{65537}, n - 1})
    CHECK(keptAcc[i] == (static_cast<double>(uniformAt(rng, i)) >= p));
}

TEST_CASE("dropout: its gradient is dropout with the same key") {
  // The autodiff pass emits dropout(grad) with the forward node's key: the backward mask must
  // equal the forward mask, and the kept gradients are scaled the same way.
  at::Tensor x = at::rand({32, 33}) + 1.0;
  at::Tensor g = at::randn({32, 33});
  RunContext ctx{.seed = 99, .step = 17};
  at::Tensor y = dropout(x, 0.3, 12, ctx);
  at::Tensor gx = dropout(g, 0.3, 12, ctx);
  at::Tensor mask = (y != 0).to(at::kFloat);
  CHECK(at::equal(gx, g * mask * static_cast<float>(1.0 / 0.7)));
}

TEST_CASE("dropout: p = 0 is the identity; f64 and bf16 inputs") {
  at::Tensor x = at::randn({100});
  CHECK(at::equal(dropout(x, 0.0, 1, {}), x));
  at::Tensor xd = at::randn({100}, at::kDouble);
  at::Tensor yd = dropout(xd, 0.5, 1, {});
  CHECK((yd.scalar_type() == at::kDouble));
  CHECK(at::equal((yd != 0), (dropout(xd.to(at::kFloat), 0.5, 1, {}) != 0)));
  at::Tensor xb = at::randn({100}).to(at::kBFloat16);
  CHECK((dropout(xb, 0.5, 1, {}).scalar_type() == at::kBFloat16));
}
