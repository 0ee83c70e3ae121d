// Batch normalisation's vector loops: see batch_norm_ops.h. Built at -O3 without trapping math
// (sources.cmake), cloned per instruction set (vector_math.h).
//
// The sums read 64 f32 values at a time as four 16-lane vectors of GCC's vector types, widen
// them to eight vectors of 8 f64, and keep 64 f64 partial sums (eight vectors: registers on
// AVX-512, two per vector on AVX2), each run's elements going to lanes 0, 1, ... in order; a
// run's last partial group of 64 is read through a copy padded with the value that adds
// nothing. The partial sums are added pairwise at the end.
#include "runtime/kernels/batch_norm_ops.h"

#include <algorithm>
#include <cstring>

#include "runtime/kernels/vector_math.h"

namespace gradc::runtime::batch_norm {
namespace {

typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec8 __attribute__((vector_size(32)));
typedef double Double8 __attribute__((vector_size(64)));

constexpr std::int64_t kLanes = 64;

// A group's 64 f32 values widened to f64, eight at a time.
struct Widened {
  Double8 v[8];
};

GRADC_VECTOR_INLINE Widened widen(const float* p) {
  Widened w;
  for (int k = 0; k < 4; ++k) {
    Vec16 v;
    std::memcpy(&v, p + 16 * k, sizeof v);
    const Vec8 first = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
    const Vec8 second = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    w.v[2 * k] = __builtin_convertvector(first, Double8);
    w.v[2 * k + 1] = __builtin_convertvector(second, Double8);
  }
  return w;
}

// 64 partial sums in f64.
struct Lanes {
  Double8 sum[8] = {};

  GRADC_VECTOR_INLINE double total() {
    for (int width = 4; width > 0; width /= 2)
      for (int k = 0; k < width; ++k) sum[k] += sum[k + width];
    double total = 0;
    for (int j = 0; j < 8; ++j) total += sum[0][j];
    return total;
  }
};

// For each group of 64 elements: group(pointers...) with the streams at the group's start.
// Runs of at least 64 elements are read in place, a run's last partial group through copies
// padded with `pads`. Shorter runs (a batch norm over [N, C] has runs of one element) are
// staged back to back into one group's copies, so a group is 64 of the channel's values
// whatever the run length; the last group is padded.
template <int Streams, class Group>
GRADC_VECTOR_INLINE void eachGroup(const float* const (&base)[Streams], const float (&pads)[Streams], Runs runs,
                                   Group&& group) {
  float staged[Streams][kLanes];
  const float* at[Streams];
  const auto padRest = [&](std::int64_t filled) {
    for (int s = 0; s < Streams; ++s) {
      std::fill(staged[s] + filled, staged[s] + kLanes, pads[s]);
      at[s] = staged[s];
    }
  };
  if (runs.size < kLanes) {
    std::int64_t filled = 0;
    for (std::int64_t p = 0; p < runs.planes; ++p) {
      const std::int64_t start = p * runs.stride;
      for (std::int64_t i = 0; i < runs.size;) {
        const std::int64_t take = std::min(runs.size - i, kLanes - filled);
        for (int s = 0; s < Streams; ++s) std::copy(base[s] + start + i, base[s] + start + i + take, staged[s] + filled);
        filled += take;
        i += take;
        if (filled == kLanes) {
          padRest(kLanes);
          group(at);
          filled = 0;
        }
      }
    }
    if (filled > 0) {
      padRest(filled);
      group(at);
    }
    return;
  }
  for (std::int64_t p = 0; p < runs.planes; ++p) {
    const std::int64_t start = p * runs.stride;
    std::int64_t i = 0;
    for (; i + kLanes <= runs.size; i += kLanes) {
      for (int s = 0; s < Streams; ++s) at[s] = base[s] + start + i;
      group(at);
    }
    if (i < runs.size) {
      for (int s = 0; s < Streams; ++s) std::copy(base[s] + start + i, base[s] + start + runs.size, staged[s]);
      padRest(runs.size - i);
      group(at);
    }
  }
}

// body(start, size) for each run.
template <class Body>
GRADC_VECTOR_INLINE void eachRun(Runs runs, Body&& body) {
  for (std::int64_t p = 0; p < runs.planes; ++p) body(p * runs.stride, runs.size);
}

}  // namespace

GRADC_VECTOR_CLONES double sum(const float* x, Runs runs) {
  Lanes lanes;
  eachGroup<1>({x}, {0.0f}, runs, [&](const float* const (&at)[1]) {
    const Widened w = widen(at[0]);
    for (int j = 0; j < 8; ++j) lanes.sum[j] += w.v[j];
  });
  return lanes.total();
}

GRADC_VECTOR_CLONES double squaredDeviations(const float* x, Runs runs, float centre) {
  Lanes lanes;
  const double c = centre;
  eachGroup<1>({x}, {centre}, runs, [&](const float* const (&at)[1]) {
    const Widened w = widen(at[0]);
    for (int j = 0; j < 8; ++j) {
      const Double8 d = w.v[j] - c;  // exact: two floats' difference fits a double
      lanes.sum[j] += d * d;
    }
  });
  return lanes.total();
}

GRADC_VECTOR_CLONES GradientSums gradientSums(const float* g, const float* x, Runs runs, float centre) {
  Lanes grad, product;
  const double c = centre;
  eachGroup<2>({g, x}, {0.0f, centre}, runs, [&](const float* const (&at)[2]) {
    const Widened gw = widen(at[0]), xw = widen(at[1]);
    for (int j = 0; j < 8; ++j) {
      grad.sum[j] += gw.v[j];
      product.sum[j] += gw.v[j] * (xw.v[j] - c);
    }
  });
  return {grad.total(), product.total()};
}

GRADC_VECTOR_CLONES void affine(const float* __restrict x, float* __restrict y, Runs runs, float scale, float shift) {
  eachRun(runs, [&](std::int64_t start, std::int64_t size) {
    const float* xi = x + start;
    float* yi = y + start;
    for (std::int64_t i = 0; i < size; ++i) yi[i] = xi[i] * scale + shift;
  });
}

GRADC_VECTOR_CLONES void gradInput(const float* __restrict g, const float* __restrict x, float* __restrict out, Runs runs,
                                   float kg, float kx, float k0) {
  eachRun(runs, [&](std::int64_t start, std::int64_t size) {
    const float* gi = g + start;
    const float* xi = x + start;
    float* oi = out + start;
    for (std::int64_t i = 0; i < size; ++i) oi[i] = gi[i] * kg + xi[i] * kx + k0;
  });
}

}  // namespace gradc::runtime::batch_norm
