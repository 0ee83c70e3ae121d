// Kernels of batch normalisation (ir/ops_batch_norm.cpp) on the host: a loop per channel over
// its contiguous planes (NCHW), the channels split over the intra-op threads. The statistics
// are two passes (the mean, then the biased variance about it), the backward one pass for
// sum(g) and sum(g (x - mean)) and one for the input gradient. f32 batch_norm and its backward
// run on the vector loops of runtime/kernels/batch_norm_ops.h (widened to f64 lanes); f64, and
// f32 evaluation, accumulate in f64 in plain loops. Nothing allocates for contiguous
// operands. Off the host (a GPU), ATen's device
// kernels run instead (runtime/kernels/kernels_conv_device.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "runtime/kernels/batch_norm_ops.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

// x[N, C, S] contiguous: channel c's values are N planes of S elements, plane n at
// (n * C + c) * S.
struct Planes {
  std::int64_t N, C, S;
  std::int64_t count() const { return N * S; }
  // The sum over channel c's values of f(value), in four interleaved partial sums (independent
  // additions the CPU can overlap).
  template <class A, class T, class F>
  A sum(const T* base, std::int64_t c, F&& f) const {
    A part[4] = {0, 0, 0, 0};
    for (std::int64_t n = 0; n < N; ++n) {
      const T* p = base + (n * C + c) * S;
      std::int64_t s = 0;
      for (; s + 4 <= S; s += 4)
        for (int k = 0; k < 4; ++k) part[k] += f(p[s + k]);
      for (; s < S; ++s) part[0] += f(p[s]);
    }
    return (part[0] + part[1]) + (part[2] + part[3]);
  }
};

Planes planesOf(const at::Tensor& x) { return {x.size(0), x.size(1), x.numel() / (x.size(0) * x.size(1))}; }

template <class T>
using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;

// f32 on the host's vector loops (batch_norm_ops.h): the same passes, the sums in f64 lanes.
// The variance is taken about the mean rounded to f32 (c) and corrected:
// sum((x - m)^2) = sum((x - c)^2) - n (m - c)^2.
void batchNormF32(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps, at::Tensor& y,
                  at::Tensor& mean, at::Tensor& invstd, at::Tensor& var) {
  const Planes P = planesOf(x);
  const batch_norm::Runs runs{P.N, P.C * P.S, P.S};
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, P.C, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const double count = static_cast<double>(P.count());
      const double m = batch_norm::sum(xp + c * P.S, runs) / count;
      const auto centre = static_cast<float>(m);
      const double offset = m - static_cast<double>(centre);
      const double squares =
          std::max(0.0, batch_norm::squaredDeviations(xp + c * P.S, runs, centre) - count * offset * offset);
      const double inv = 1 / std::sqrt(squares / count + eps);
      mean.data_ptr<float>()[c] = centre;
      invstd.data_ptr<float>()[c] = static_cast<float>(inv);
      var.data_ptr<float>()[c] = static_cast<float>(squares / (count - 1));
      const auto alpha = static_cast<float>(inv * static_cast<double>(w.data_ptr<float>()[c]));
      const auto beta = static_cast<float>(static_cast<double>(b.data_ptr<float>()[c]) - m * static_cast<double>(alpha));
      batch_norm::affine(xp + c * P.S, yp + c * P.S, runs, alpha, beta);
    }
  });
}

// Two passes over each channel: the mean, then the biased variance about it.
Results batchNormKernel(const KernelArgs& a) {
  const at::Tensor x = a.operands[0].contiguous(), w = a.operands[1].contiguous(), b = a.operands[2].contiguous();
  at::Tensor y = resultBuffer(a, 0), mean = resultBuffer(a, 1), invstd = resultBuffer(a, 2), var = resultBuffer(a, 3);
  const Planes P = planesOf(x);
  const double eps = floatAttr(a.node, "eps");
  if (x.scalar_type() == at::kFloat) {
    batchNormF32(x, w, b, eps, y, mean, invstd, var);
    return {y, mean, invstd, var};
  }
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm", [&] {
    using A = Acc<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    at::parallel_for(0, P.C, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) {
        const A m = P.sum<A>(xp, c, [](scalar_t v) { return static_cast<A>(v); }) / static_cast<A>(P.count());
        const A squares = P.sum<A>(xp, c, [m](scalar_t v) { return (static_cast<A>(v) - m) * (static_cast<A>(v) - m); });
        const A biased = squares / static_cast<A>(P.count());
        const A inv = 1 / std::sqrt(biased + static_cast<A>(eps));
        mean.data_ptr<scalar_t>()[c] = static_cast<scalar_t>(m);
        invstd.data_ptr<scalar_t>()[c] = static_cast<scalar_t>(inv);
        var.data_ptr<scalar_t>()[c] = static_cast<scalar_t>(squares / static_cast<A>(P.count() - 1));
        // y = x * alpha + beta in the data's type, as ATen's CPU transform computes it (a loop
        // the compiler vectorises).
        const auto alpha = static_cast<scalar_t>(inv * static_cast<A>(w.data_ptr<scalar_t>()[c]));
        const auto beta = static_cast<scalar_t>(static_cast<A>(b.data_ptr<scalar_t>()[c]) - m * static_cast<A>(alpha));
        for (std::int64_t n = 0; n < P.N; ++n) {
          const scalar_t* xi = xp + (n * P.C + c) * P.S;
          scalar_t* yi = yp + (n * P.C + c) * P.S;
          for (std::int64_t s = 0; s < P.S; ++s) yi[s] = xi[s] * alpha + beta;
        }
      }
    });
  });
  return {y, mean, invstd, var};
}

// f32 on the host's vector loops: sum(g) and sum(g (x - c)) about the saved mean c, then the
// same coefficients as below.
void batchNormBackwardF32(const at::Tensor& gy, const at::Tensor& x, const at::Tensor& mean, const at::Tensor& invstd,
                          const at::Tensor& w, at::Tensor& gx, at::Tensor& gw, at::Tensor& gb) {
  const Planes P = planesOf(x);
  const batch_norm::Runs runs{P.N, P.C * P.S, P.S};
  const float* xp = x.data_ptr<float>();
  const float* gp = gy.data_ptr<float>();
  float* gxp = gx.data_ptr<float>();
  at::parallel_for(0, P.C, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const float centre = mean.data_ptr<float>()[c];
      const double m = centre, inv = invstd.data_ptr<float>()[c];
      const batch_norm::GradientSums sums = batch_norm::gradientSums(gp + c * P.S, xp + c * P.S, runs, centre);
      const double sumG = sums.grad, dot = sums.gradTimesDeviation;
      gb.data_ptr<float>()[c] = static_cast<float>(sumG);
      gw.data_ptr<float>()[c] = static_cast<float>(dot * inv);
      const double count = static_cast<double>(P.count());
      const double gradMean = sumG / count, projection = dot * inv * inv / count;
      const double scale = inv * static_cast<double>(w.data_ptr<float>()[c]);
      batch_norm::gradInput(gp + c * P.S, xp + c * P.S, gxp + c * P.S, runs, static_cast<float>(scale),
                            static_cast<float>(-projection * scale), static_cast<float>((m * projection - gradMean) * scale));
    }
  });
}

// gx = (g - mean(g) - xhat * mean(g * xhat)) * invstd * w with xhat = (x - mean) * invstd;
// gw = sum(g * xhat), gb = sum(g).
Results batchNormBackwardKernel(const KernelArgs& a) {
  const at::Tensor gy = a.operands[0].contiguous(), x = a.operands[1].contiguous();
  const at::Tensor mean = a.operands[2].contiguous(), invstd = a.operands[3].contiguous(), w = a.operands[4].contiguous();
  at::Tensor gx = resultBuffer(a, 0), gw = resultBuffer(a, 1), gb = resultBuffer(a, 2);
  if (x.scalar_type() == at::kFloat) {
    batchNormBackwardF32(gy, x, mean, invstd, w, gx, gw, gb);
    return {gx, gw, gb};
  }
  const Planes P = planesOf(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_backward", [&] {
    using A = Acc<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* gp = gy.data_ptr<scalar_t>();
    scalar_t* gxp = gx.data_ptr<scalar_t>();
    at::parallel_for(0, P.C, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) {
        const A m = mean.data_ptr<scalar_t>()[c], inv = invstd.data_ptr<scalar_t>()[c];
        // sum(g) and sum(g * (x - mean)) in one pass, four partial sums each.
        A g4[4] = {0, 0, 0, 0}, d4[4] = {0, 0, 0, 0};
        for (std::int64_t n = 0; n < P.N; ++n) {
          const std::int64_t off = (n * P.C + c) * P.S;
          std::int64_t s = 0;
          for (; s + 4 <= P.S; s += 4)
            for (int k = 0; k < 4; ++k) {
              const A gv = gp[off + s + k];
              g4[k] += gv;
              d4[k] += gv * (static_cast<A>(xp[off + s + k]) - m);
            }
          for (; s < P.S; ++s) {
            g4[0] += gp[off + s];
            d4[0] += gp[off + s] * (static_cast<A>(xp[off + s]) - m);
          }
        }
        const A sumG = (g4[0] + g4[1]) + (g4[2] + g4[3]), dot = (d4[0] + d4[1]) + (d4[2] + d4[3]);
        gb.data_ptr<scalar_t>()[c] = static_cast<scalar_t>(sumG);
        gw.data_ptr<scalar_t>()[c] = static_cast<scalar_t>(dot * inv);
        const A count = static_cast<A>(P.count());
        const A gradMean = sumG / count, projection = dot * inv * inv / count;
        const A scale = inv * static_cast<A>(w.data_ptr<scalar_t>()[c]);
        // gx = g * scale - x * projection * scale + (m * projection - gradMean) * scale, with the
        // coefficients in the data's type (a vectorised loop).
        const auto kg = static_cast<scalar_t>(scale), kx = static_cast<scalar_t>(-projection * scale);
        const auto k0 = static_cast<scalar_t>((m * projection - gradMean) * scale);
        for (std::int64_t n = 0; n < P.N; ++n) {
          const std::int64_t off = (n * P.C + c) * P.S;
          for (std::int64_t s = 0; s < P.S; ++s) gxp[off + s] = gp[off + s] * kg + xp[off + s] * kx + k0;
        }
      }
    });
  });
  return {gx, gw, gb};
}

// running = (1 - momentum) * running + momentum * batch, in place; num_batches_tracked + 1.
// Cumulative (momentum: null): momentum = 1 / (num_batches_tracked + 1).
Results runningStatsUpdateKernel(const KernelArgs& a) {
  at::Tensor rm = a.operands[0], rv = a.operands[1], tracked = a.operands[2];
  const at::Tensor mean = a.operands[3].contiguous(), var = a.operands[4].contiguous();
  // PyTorch's momentum=None: batch n (1-based) weighs 1 / n.
  const bool cumulative = ir::getBool(a.node.attrs(), "cumulative").value_or(false);
  const double m = cumulative ? 1.0 / static_cast<double>(tracked.data_ptr<std::int64_t>()[0] + 1)
                              : floatAttr(a.node, "momentum");
  AT_DISPATCH_FLOATING_TYPES(rm.scalar_type(), "running_stats_update", [&] {
    using A = Acc<scalar_t>;
    scalar_t* rmp = rm.data_ptr<scalar_t>();
    scalar_t* rvp = rv.data_ptr<scalar_t>();
    for (std::int64_t c = 0; c < rm.numel(); ++c) {
      rmp[c] = static_cast<scalar_t>(m * static_cast<A>(mean.data_ptr<scalar_t>()[c]) + (1 - m) * static_cast<A>(rmp[c]));
      rvp[c] = static_cast<scalar_t>(m * static_cast<A>(var.data_ptr<scalar_t>()[c]) + (1 - m) * static_cast<A>(rvp[c]));
    }
  });
  tracked.data_ptr<std::int64_t>()[0] += 1;
  return {};
}

// y = (x - running_mean) / sqrt(running_var + eps) * w + b.
Results batchNormInferenceKernel(const KernelArgs& a) {
  const at::Tensor x = a.operands[0].contiguous();
  at::Tensor y = resultBuffer(a);
  const Planes P = planesOf(x);
  const double eps = floatAttr(a.node, "eps");
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "batch_norm_inference", [&] {
    using A = Acc<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    const at::Tensor w = a.operands[1].contiguous(), b = a.operands[2].contiguous();
    const at::Tensor rm = a.operands[3].contiguous(), rv = a.operands[4].contiguous();
    auto at = [](const at::Tensor& t, std::int64_t c) { return static_cast<A>(t.data_ptr<scalar_t>()[c]); };
    for (std::int64_t c = 0; c < P.C; ++c) {
      const A alpha = at(w, c) / std::sqrt(at(rv, c) + static_cast<A>(eps));
      const A beta = at(b, c) - at(rm, c) * alpha;
      for (std::int64_t n = 0; n < P.N; ++n) {
        const std::int64_t off = (n * P.C + c) * P.S;
        for (std::int64_t s = 0; s < P.S; ++s) yp[off + s] = static_cast<scalar_t>(xp[off + s] * alpha + beta);
      }
    }
  });
  return {y};
}

const KernelEntry kHostBatchNorm[] = {
    {"batch_norm", batchNormKernel},
    {"batch_norm_backward", batchNormBackwardKernel},
    {"running_stats_update", runningStatsUpdateKernel},
    {"batch_norm_inference", batchNormInferenceKernel},
};

}  // namespace

std::span<const KernelEntry> hostBatchNormKernels() { return kHostBatchNorm; }

}  // namespace gradc::runtime
