// bf16 products on oneDNN's matmul (see gemm.h). Primitive descriptors and primitives are built
// once per (product, thread count) and cached for the life of the process: building one
// JIT-compiles its kernels, far more than a small product's run.
#include "onednn/gemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#if GRADC_WITH_ONEDNN
#include "onednn/common.h"
#endif

namespace gradc::onednn {

#if GRADC_WITH_ONEDNN
namespace {

using Dims = dnnl::memory::dims;
using DataType = dnnl::memory::data_type;
using detail::cpuEngine;
using detail::plannedAttributes;
using detail::ThreadsScope;

// Elements from an operand's first to its last, inclusive: what a batch of one spans (its batch
// stride is never used, but oneDNN wants one).
std::int64_t extent(const MatrixLayout& l) { return (l.rows - 1) * l.rowStride + (l.cols - 1) * l.colStride + 1; }

dnnl::memory::desc operandDesc(const MatrixLayout& l, bool batched) {
  if (!batched) return dnnl::memory::desc(Dims{l.rows, l.cols}, DataType::bf16, Dims{l.rowStride, l.colStride});
  const std::int64_t batchStride = l.batch == 1 ? extent(l) : l.batchStride;
  return dnnl::memory::desc(Dims{l.batch, l.rows, l.cols}, DataType::bf16, Dims{batchStride, l.rowStride, l.colStride});
}

dnnl::memory::desc resultDesc(const Product& p) {
  const std::int64_t m = p.a.rows, n = p.b.cols;
  if (!p.batched) return dnnl::memory::desc(Dims{m, n}, DataType::bf16, Dims{n, 1});
  return dnnl::memory::desc(Dims{p.batch, m, n}, DataType::bf16, Dims{m * n, n, 1});
}

dnnl::memory::desc biasDesc(const Product& p) {
  const std::int64_t n = p.b.cols;
  if (!p.batched) return dnnl::memory::desc(Dims{1, n}, DataType::bf16, Dims{n, 1});
  return dnnl::memory::desc(Dims{1, 1, n}, DataType::bf16, Dims{n, n, 1});
}

struct Compiled {
  std::optional<dnnl::matmul::primitive_desc> pd;  // none: no kernel for this product here
  std::optional<dnnl::matmul> primitive;           // built on first run
  std::int64_t scratchpad = 0;
};

std::vector<std::int64_t> keyOf(const Product& p, int threads) {
  std::vector<std::int64_t> key{threads, p.batch, p.batched, p.bias, p.accumulate};
  for (const MatrixLayout* l : {&p.a, &p.b})
    key.insert(key.end(), {l->batch, l->rows, l->cols, l->batchStride, l->rowStride, l->colStride});
  return key;
}

std::mutex cacheMutex;
std::map<std::vector<std::int64_t>, Compiled> cache;

// The cached entry of this product at `threads`, built when missing. Caller holds cacheMutex.
Compiled& compiled(const Product& p, int threads) {
  auto [it, inserted] = cache.try_emplace(keyOf(p, threads));
  if (!inserted) return it->second;
  Compiled& c = it->second;
  ThreadsScope scope(threads);
  dnnl::primitive_attr attr = plannedAttributes();
  if (p.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  try {
    const dnnl::memory::desc a = operandDesc(p.a, p.batched), b = operandDesc(p.b, p.batched);
#if DNNL_VERSION_MAJOR >= 3  // oneDNN 3 describes a primitive in its primitive descriptor
    dnnl::matmul::primitive_desc pd = p.bias ? dnnl::matmul::primitive_desc(cpuEngine(), a, b, biasDesc(p), resultDesc(p), attr)
                                             : dnnl::matmul::primitive_desc(cpuEngine(), a, b, resultDesc(p), attr);
#else
    dnnl::matmul::desc desc = p.bias ? dnnl::matmul::desc(a, b, biasDesc(p), resultDesc(p))
                                     : dnnl::matmul::desc(a, b, resultDesc(p));
    dnnl::matmul::primitive_desc pd(desc, attr, cpuEngine());
#endif
    // A CPU without a bf16 kernel (only the reference one) is left to ATen.
    if (detail::isReference(pd.impl_info_str())) return c;
    c.scratchpad = static_cast<std::int64_t>(pd.scratchpad_desc().get_size());
    c.pd = std::move(pd);
  } catch (const dnnl::error&) {
    // No implementation for this layout: nothing cached but the answer.
  }
  return c;
}

// The layouts a BLAS reads without a copy: row- or column-major, dense or with a padded leading
// dimension (a slice of a wider matrix).
std::array<MatrixLayout, 4> layoutsOf(std::int64_t batch, std::int64_t rows, std::int64_t cols) {
  std::array<MatrixLayout, 4> out;
  auto set = [&](MatrixLayout& l, bool rowMajor, std::int64_t pad) {
    l.batch = batch;
    l.rows = rows;
    l.cols = cols;
    l.rowStride = rowMajor ? cols + pad : 1;
    l.colStride = rowMajor ? 1 : rows + pad;
    l.batchStride = extent(l);
  };
  set(out[0], true, 0);
  set(out[1], false, 0);
  set(out[2], true, cols);
  set(out[3], false, rows);
  return out;
}

}  // namespace

bool available() {
  static const bool yes = [] {
    Product p;
    p.a = {1, 16, 32, 16 * 32, 32, 1};
    p.b = {1, 32, 16, 32 * 16, 16, 1};
    return scratchpadBytes(p, 1).has_value();
  }();
  return yes;
}

bool native() {
  static const bool yes = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return available() && (isa & bf16) == bf16;  // the ISA values nest as bit sets
  }();
  return yes;
}

std::optional<std::int64_t> scratchpadBytes(const Product& product, int threads) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  const Compiled& c = compiled(product, threads);
  if (!c.pd) return std::nullopt;
  return c.scratchpad;
}

std::int64_t scratchpadBound(const ProductShape& s, int threads) {
  if (s.m <= 0 || s.k <= 0 || s.n <= 0 || s.batch <= 0 || !available()) return 0;
  // Asked for every product node at every plan and by every kernel call: remembered per shape.
  static std::mutex boundMutex;
  static std::map<std::vector<std::int64_t>, std::int64_t> bounds;
  const std::vector<std::int64_t> key{threads, s.batch, s.m, s.k, s.n, s.batched, s.broadcastA, s.broadcastB,
                                      s.bias, s.accumulate};
  {
    std::lock_guard<std::mutex> lock(boundMutex);
    if (auto it = bounds.find(key); it != bounds.end()) return it->second;
  }
  std::int64_t bound = 0;
  for (const MatrixLayout& a : layoutsOf(s.broadcastA ? 1 : s.batch, s.m, s.k))
    for (const MatrixLayout& b : layoutsOf(s.broadcastB ? 1 : s.batch, s.k, s.n)) {
      Product p{.batch = s.batch, .batched = s.batched, .a = a, .b = b, .bias = s.bias, .accumulate = s.accumulate};
      bound = std::max(bound, scratchpadBytes(p, threads).value_or(0));
    }
  std::lock_guard<std::mutex> lock(boundMutex);
  bounds.emplace(key, bound);
  return bound;
}

std::string run(const Product& product, const void* a, const void* b, const void* bias, void* c, void* scratch,
                std::int64_t scratchBytes) {
  const int threads = omp_get_max_threads();
  dnnl::matmul primitive;
  dnnl::matmul::primitive_desc pd;
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    Compiled& entry = compiled(product, threads);
    if (!entry.pd) return "oneDNN has no bf16 matmul kernel for this layout";
    if (entry.scratchpad > scratchBytes)
      return "oneDNN needs a scratchpad of " + std::to_string(entry.scratchpad) + " bytes, the plan holds " +
             std::to_string(scratchBytes);
    if (!entry.primitive) entry.primitive = dnnl::matmul(*entry.pd);
    primitive = *entry.primitive;
    pd = *entry.pd;
  }
  dnnl::engine& engine = cpuEngine();
  auto memory = [&](const dnnl::memory::desc& d, const void* p) { return dnnl::memory(d, engine, const_cast<void*>(p)); };
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, memory(pd.src_desc(), a)},
      {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), b)},
      {DNNL_ARG_DST, memory(pd.dst_desc(), c)},
  };
  if (pd.scratchpad_desc().get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), scratch));
  if (product.bias) args.emplace(DNNL_ARG_BIAS, memory(pd.bias_desc(), bias));
  dnnl::stream stream(engine);
  primitive.execute(stream, args);
  stream.wait();
  return {};
}

std::string implementation(const Product& product, int threads) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  const Compiled& c = compiled(product, threads);
  return c.pd ? std::string(c.pd->impl_info_str()) : std::string();
}

#else  // !GRADC_WITH_ONEDNN

bool available() { return false; }
bool native() { return false; }
std::optional<std::int64_t> scratchpadBytes(const Product&, int) { return std::nullopt; }
std::int64_t scratchpadBound(const ProductShape&, int) { return 0; }
std::string run(const Product&, const void*, const void*, const void*, void*, void*, std::int64_t) {
  return "gradc was built without oneDNN";
}
std::string implementation(const Product&, int) { return {}; }

#endif

namespace {

Bf16Route decideBf16Route() {
  const char* forced = std::getenv("GRADC_BF16_PRODUCTS");
  if (forced != nullptr && std::string_view(forced) == "widened") return Bf16Route::kWidened;
  if (forced != nullptr && std::string_view(forced) == "onednn" && available()) return Bf16Route::kOneDnn;
  return native() ? Bf16Route::kOneDnn : Bf16Route::kWidened;
}

std::atomic<int> imposedRoute{-1};  // -1: none; else a Bf16Route

}  // namespace

Bf16Route bf16Route() {
  static const Bf16Route decided = decideBf16Route();
  const int imposed = imposedRoute.load(std::memory_order_relaxed);
  return imposed < 0 ? decided : static_cast<Bf16Route>(imposed);
}

const char* nameOf(Bf16Route route) { return route == Bf16Route::kOneDnn ? "onednn" : "widened"; }

bool imposeBf16Route(std::optional<Bf16Route> route) {
  if (route == Bf16Route::kOneDnn && !available()) return false;
  imposedRoute.store(route ? static_cast<int>(*route) : -1, std::memory_order_relaxed);
  return true;
}

}  // namespace gradc::onednn
