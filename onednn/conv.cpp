// Convolutions on oneDNN's blocked kernels (see conv.h). Per (shape, pass, thread count, chunk),
// built once and cached: the primitive descriptor of a full chunk (its layouts chosen by
// oneDNN: format `any`) and, when the chunk does not divide the batch, one for the remaining
// samples whose weights layout is fixed to the full chunk's (the weights are copied once for
// both); one reorder per operand whose chosen layout is not the plain one; and the workspace's
// layout. Planning asks only for sizes; the primitives (JIT-compiled code) are built on the
// first run. The workspace:
// [the weights' (or weight gradient's) copy][one slot per per-sample operand, sized for a full
// chunk][one scratchpad region, shared by the convolutions and the reorders, which run one
// after another], each 64-byte aligned.
#include "onednn/conv.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#if GRADC_WITH_ONEDNN
#include "onednn/common.h"
#endif

namespace gradc::onednn {

#if GRADC_WITH_ONEDNN
namespace {

using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;
using DataType = dnnl::memory::data_type;
using detail::cpuEngine;
using detail::plannedAttributes;
using detail::ThreadsScope;

constexpr std::int64_t kAlignment = 64;

std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }
std::int64_t sizeOf(const dnnl::memory::desc& d) { return static_cast<std::int64_t>(d.get_size()); }

// A per-sample operand of one chunk (x, y or their gradients): its plain layout over the
// chunk's samples, the layout the kernel reads or writes, and the reorder between them.
struct Batched {
  int arg = 0;
  bool output = false;
  std::int64_t sampleBytes = 0;  // one sample of the plain operand
  dnnl::memory::desc plain, kernel;
  bool reordered = false;
  dnnl::reorder::primitive_desc reorderDesc;
  dnnl::reorder reorder;  // built on the first run
};

// The convolution over `samples` samples.
struct Variant {
  std::int64_t samples = 0;
  std::string implementation;
  std::function<dnnl::primitive()> make;
  dnnl::primitive primitive;  // built on the first run
  std::vector<Batched> batched;
  dnnl::memory::desc shared;  // the weights' (or weight gradient's) layout
  std::int64_t scratchpad = 0;
};

struct Compiled {
  bool ok = false;
  std::int64_t chunk = 0;
  Variant full, rest;  // rest.samples == 0 when chunk divides the batch
  // The weights (Forward, InputGrad: read) or the weight gradient (WeightGrad: written).
  int sharedArg = 0;
  bool sharedOutput = false;
  dnnl::memory::desc sharedPlain;
  bool sharedCopied = false;  // has a copy in the workspace
  dnnl::reorder::primitive_desc sharedDesc, accumulateDesc;  // accumulate: WeightGrad, chunks after the first
  dnnl::reorder sharedReorder, accumulate;
  bool built = false;
  std::vector<std::int64_t> slots;  // per batched operand
  std::int64_t scratchpadOffset = 0, scratchpadBytes = 0, total = 0;
};

dnnl::memory::desc plainImage(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, Tag tag) {
  return dnnl::memory::desc(Dims{n, c, h, w}, DataType::f32, tag);
}

Dims weightDims(const ConvShape& s) {
  return s.groups > 1 ? Dims{s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw} : Dims{s.o, s.c, s.kh, s.kw};
}

dnnl::memory::desc weightsPlain(const ConvShape& s) {
  return dnnl::memory::desc(weightDims(s), DataType::f32, s.groups > 1 ? Tag::goihw : Tag::oihw);
}

// Fills in a variant from its pass's primitive descriptor: its per-sample operands, the layout
// of its weights (or weight gradient), its scratchpad, and how to build the primitive.
template <class Primitive, class PrimitiveDesc>
void describe(Variant& v, const PrimitiveDesc& pd, std::vector<Batched> batched, const dnnl::memory::desc& shared) {
  v.implementation = pd.impl_info_str();
  v.batched = std::move(batched);
  v.shared = shared;
  v.scratchpad = sizeOf(pd.scratchpad_desc());
  v.make = [pd] { return Primitive(pd); };
}

// The convolution over `m` samples; its weights layout `any` or, when given, `weights`.
// Throws dnnl::error when oneDNN has no implementation.
Variant buildVariant(const ConvShape& s, ConvPass pass, std::int64_t m, const dnnl::memory::desc* weights) {
  Variant v;
  v.samples = m;
  const dnnl::memory::desc srcAny = plainImage(m, s.c, s.h, s.w, Tag::any);
  const dnnl::memory::desc dstAny = plainImage(m, s.o, s.oh, s.ow, Tag::any);
  const dnnl::memory::desc weightsAny = weights ? *weights : dnnl::memory::desc(weightDims(s), DataType::f32, Tag::any);
  const dnnl::memory::desc srcPlain = plainImage(m, s.c, s.h, s.w, Tag::nchw);
  const dnnl::memory::desc dstPlain = plainImage(m, s.o, s.oh, s.ow, Tag::nchw);
  const std::int64_t srcSample = s.c * s.h * s.w * 4, dstSample = s.o * s.oh * s.ow * 4;
  const dnnl::memory::desc biasPlain(Dims{s.o}, DataType::f32, Tag::a);
  const Dims strides{s.stride[0], s.stride[1]}, padding{s.padding[0], s.padding[1]};
  const Dims dilation{s.dilation[0] - 1, s.dilation[1] - 1};  // oneDNN counts the gaps
  const dnnl::primitive_attr attr = plannedAttributes();
  const bool bias = pass == ConvPass::Forward && s.bias;
  // oneDNN 2 describes a primitive as an operation descriptor, then its primitive descriptor;
  // oneDNN 3 takes the description in the primitive descriptor.
  constexpr auto direct = dnnl::algorithm::convolution_direct;
  constexpr auto training = dnnl::prop_kind::forward_training;
#if DNNL_VERSION_MAJOR >= 3
  const dnnl::convolution_forward::primitive_desc fpd =
      bias ? dnnl::convolution_forward::primitive_desc(cpuEngine(), training, direct, srcAny, weightsAny, biasPlain,
                                                       dstAny, strides, dilation, padding, padding, attr)
           : dnnl::convolution_forward::primitive_desc(cpuEngine(), training, direct, srcAny, weightsAny, dstAny,
                                                       strides, dilation, padding, padding, attr);
#else
  const dnnl::convolution_forward::primitive_desc fpd(
      bias ? dnnl::convolution_forward::desc(training, direct, srcAny, weightsAny, biasPlain, dstAny, strides, dilation,
                                             padding, padding)
           : dnnl::convolution_forward::desc(training, direct, srcAny, weightsAny, dstAny, strides, dilation, padding,
                                             padding),
      attr, cpuEngine());
#endif
  switch (pass) {
    case ConvPass::Forward:
      describe<dnnl::convolution_forward>(v, fpd,
                                          {{DNNL_ARG_SRC, false, srcSample, srcPlain, fpd.src_desc()},
                                           {DNNL_ARG_DST, true, dstSample, dstPlain, fpd.dst_desc()}},
                                          fpd.weights_desc());
      break;
    case ConvPass::InputGrad: {
#if DNNL_VERSION_MAJOR >= 3
      dnnl::convolution_backward_data::primitive_desc pd(cpuEngine(), direct, srcAny, weightsAny, dstAny, strides,
                                                         dilation, padding, padding, fpd, attr);
#else
      dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(direct, srcAny, weightsAny, dstAny, strides, dilation, padding, padding),
          attr, cpuEngine(), fpd);
#endif
      describe<dnnl::convolution_backward_data>(v, pd,
                                                {{DNNL_ARG_DIFF_DST, false, dstSample, dstPlain, pd.diff_dst_desc()},
                                                 {DNNL_ARG_DIFF_SRC, true, srcSample, srcPlain, pd.diff_src_desc()}},
                                                pd.weights_desc());
      break;
    }
    case ConvPass::WeightGrad: {
#if DNNL_VERSION_MAJOR >= 3
      dnnl::convolution_backward_weights::primitive_desc pd(cpuEngine(), direct, srcAny, weightsAny, dstAny, strides,
                                                            dilation, padding, padding, fpd, attr);
#else
      dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(direct, srcAny, weightsAny, dstAny, strides, dilation, padding,
                                                   padding),
          attr, cpuEngine(), fpd);
#endif
      describe<dnnl::convolution_backward_weights>(v, pd,
                                                   {{DNNL_ARG_SRC, false, srcSample, srcPlain, pd.src_desc()},
                                                    {DNNL_ARG_DIFF_DST, false, dstSample, dstPlain, pd.diff_dst_desc()}},
                                                   pd.diff_weights_desc());
      break;
    }
  }
  for (Batched& b : v.batched) {
    b.reordered = b.plain != b.kernel;
    if (!b.reordered) continue;
    b.reorderDesc = b.output
        ? dnnl::reorder::primitive_desc(cpuEngine(), b.kernel, cpuEngine(), b.plain, plannedAttributes())
        : dnnl::reorder::primitive_desc(cpuEngine(), b.plain, cpuEngine(), b.kernel, plannedAttributes());
    v.scratchpad = std::max(v.scratchpad, sizeOf(b.reorderDesc.scratchpad_desc()));
  }
  return v;
}

// Lays the workspace out: the shared copy, one slot per batched operand (the larger of the two
// variants' copies), and the scratchpad (the largest any primitive or reorder asks).
void layOut(Compiled& c, ConvPass pass, std::int64_t batch) {
  const bool chunked = c.chunk < batch;
  c.sharedArg = pass == ConvPass::WeightGrad ? DNNL_ARG_DIFF_WEIGHTS : DNNL_ARG_WEIGHTS;
  c.sharedOutput = pass == ConvPass::WeightGrad;
  // A weight gradient summed over several chunks goes through a copy even in the plain layout.
  c.sharedCopied = c.full.shared != c.sharedPlain || (c.sharedOutput && chunked);
  std::int64_t offset = 0, scratchpad = std::max(c.full.scratchpad, c.rest.scratchpad);
  if (c.sharedCopied) {
    offset = aligned(sizeOf(c.full.shared));
    const dnnl::primitive_attr plainAttr = plannedAttributes();
    c.sharedDesc = c.sharedOutput
        ? dnnl::reorder::primitive_desc(cpuEngine(), c.full.shared, cpuEngine(), c.sharedPlain, plainAttr)
        : dnnl::reorder::primitive_desc(cpuEngine(), c.sharedPlain, cpuEngine(), c.full.shared, plainAttr);
    scratchpad = std::max(scratchpad, sizeOf(c.sharedDesc.scratchpad_desc()));
    if (c.sharedOutput && chunked) {
      dnnl::primitive_attr sum = plannedAttributes();
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      sum.set_post_ops(ops);
      c.accumulateDesc = dnnl::reorder::primitive_desc(cpuEngine(), c.full.shared, cpuEngine(), c.sharedPlain, sum);
      scratchpad = std::max(scratchpad, sizeOf(c.accumulateDesc.scratchpad_desc()));
    }
  }
  c.slots.assign(c.full.batched.size(), -1);
  for (std::size_t i = 0; i < c.full.batched.size(); ++i) {
    std::int64_t bytes = c.full.batched[i].reordered ? sizeOf(c.full.batched[i].kernel) : 0;
    if (c.rest.samples > 0 && c.rest.batched[i].reordered) bytes = std::max(bytes, sizeOf(c.rest.batched[i].kernel));
    if (bytes == 0) continue;
    c.slots[i] = offset;
    offset += aligned(bytes);
  }
  c.scratchpadOffset = offset;
  c.scratchpadBytes = scratchpad;
  c.total = offset + aligned(scratchpad);
}

std::shared_ptr<Compiled> build(const ConvShape& s, ConvPass pass, int threads, std::int64_t chunk) {
  auto c = std::make_shared<Compiled>();
  c->chunk = chunk;
  c->sharedPlain = weightsPlain(s);
  ThreadsScope scope(threads);
  try {
    c->full = buildVariant(s, pass, chunk, nullptr);
    if (detail::isReference(c->full.implementation.c_str())) return c;
    if (const std::int64_t rest = s.n % chunk; rest > 0) {
      c->rest = buildVariant(s, pass, rest, &c->full.shared);
      if (detail::isReference(c->rest.implementation.c_str()) || c->rest.shared != c->full.shared) return c;
    }
    layOut(*c, pass, s.n);
    c->ok = true;
  } catch (const dnnl::error&) {
    c->ok = false;  // no implementation: the caller's own kernel runs
  }
  return c;
}

std::vector<std::int64_t> keyOf(const ConvShape& s, ConvPass pass, int threads, std::int64_t chunk) {
  return {threads,     static_cast<std::int64_t>(pass), chunk, s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow,
          s.stride[0], s.stride[1], s.padding[0], s.padding[1], s.dilation[0], s.dilation[1], s.groups, s.bias};
}

std::mutex cacheMutex;
std::map<std::vector<std::int64_t>, std::shared_ptr<Compiled>> cache;

void buildPrimitives(Variant& v) {
  if (v.samples == 0) return;
  v.primitive = v.make();
  for (Batched& b : v.batched)
    if (b.reordered) b.reorder = dnnl::reorder(b.reorderDesc);
}

bool valid(const ConvShape& s, std::int64_t chunk) {
  return s.n > 0 && chunk >= 1 && chunk <= s.n && s.groups > 0 && s.o % s.groups == 0 && s.c % s.groups == 0;
}

// The cached entry; with `primitives`, its primitives built too (the first run's work).
std::shared_ptr<const Compiled> compiled(const ConvShape& s, ConvPass pass, int threads, std::int64_t chunk,
                                         bool primitives = false) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto [it, inserted] = cache.try_emplace(keyOf(s, pass, threads, chunk));
  if (inserted) it->second = build(s, pass, threads, chunk);
  Compiled& c = *it->second;
  if (primitives && c.ok && !c.built) {
    ThreadsScope scope(threads);
    buildPrimitives(c.full);
    buildPrimitives(c.rest);
    if (c.sharedCopied) c.sharedReorder = dnnl::reorder(c.sharedDesc);
    if (c.accumulateDesc) c.accumulate = dnnl::reorder(c.accumulateDesc);
    c.built = true;
  }
  return it->second;
}

const void* batchedPointer(int arg, const ConvBuffers& b) {
  switch (arg) {
    case DNNL_ARG_SRC: return b.x;
    case DNNL_ARG_DST: return b.y;
    case DNNL_ARG_DIFF_DST: return b.gy;
    case DNNL_ARG_DIFF_SRC: return b.gx;
  }
  return nullptr;
}

}  // namespace

std::optional<std::int64_t> convWorkspaceBytes(const ConvShape& shape, ConvPass pass, int threads,
                                               std::int64_t chunk) {
  if (!valid(shape, chunk)) return std::nullopt;
  std::shared_ptr<const Compiled> c = compiled(shape, pass, threads, chunk);
  if (!c->ok) return std::nullopt;
  return c->total;
}

namespace {

std::optional<ConvChunking> searchChunking(const ConvShape& shape, ConvPass pass, int threads, std::int64_t limitBytes) {
  // The workspace of one and of two samples, asked of a batch of that size (the same answers
  // for every batch, so a batch search asks them once): the copies grow by a sample's blocked
  // size per sample, which sizes the first guess.
  ConvShape one = shape, two = shape;
  one.n = 1;
  two.n = 2;
  const std::optional<std::int64_t> oneBytes = convWorkspaceBytes(one, pass, threads, 1);
  if (!oneBytes || !convWorkspaceBytes(shape, pass, threads, 1)) return std::nullopt;
  const std::int64_t cap = std::max(limitBytes, *oneBytes);
  const auto fits = [&](std::int64_t chunk) {
    const std::optional<std::int64_t> bytes = convWorkspaceBytes(shape, pass, threads, chunk);
    return bytes && *bytes <= cap;
  };
  const std::optional<std::int64_t> twoBytes = convWorkspaceBytes(two, pass, threads, 2);
  const std::int64_t perSample = twoBytes ? std::max<std::int64_t>(*twoBytes - *oneBytes, 1) : cap;
  std::int64_t chunk = std::clamp<std::int64_t>(1 + (cap - *oneBytes) / perSample, 1, shape.n);
  // The scratchpad need not grow in step: bisect down from a guess that does not fit, then take
  // the largest chunk above that still fits.
  if (!fits(chunk)) {
    std::int64_t fitting = 1, over = chunk;
    while (over - fitting > 1) {
      const std::int64_t mid = fitting + (over - fitting) / 2;
      (fits(mid) ? fitting : over) = mid;
    }
    chunk = fitting;
  }
  while (chunk < shape.n && fits(chunk + 1)) ++chunk;
  return ConvChunking{chunk, *convWorkspaceBytes(shape, pass, threads, chunk)};
}

std::mutex chunkingMutex;
std::map<std::vector<std::int64_t>, std::optional<ConvChunking>> chunkings;

}  // namespace

// Remembered per question: the kernel asks it on every call, the planner once per node.
std::optional<ConvChunking> convChunking(const ConvShape& shape, ConvPass pass, int threads, std::int64_t limitBytes) {
  std::vector<std::int64_t> key = keyOf(shape, pass, threads, 0);
  key.push_back(limitBytes);
  {
    std::lock_guard<std::mutex> lock(chunkingMutex);
    if (auto it = chunkings.find(key); it != chunkings.end()) return it->second;
  }
  const std::optional<ConvChunking> answer = searchChunking(shape, pass, threads, limitBytes);
  std::lock_guard<std::mutex> lock(chunkingMutex);
  chunkings.emplace(std::move(key), answer);
  return answer;
}

std::string runConv(const ConvShape& shape, ConvPass pass, std::int64_t chunk, const ConvBuffers& buffers,
                    void* workspace, std::int64_t workspaceBytes) {
  if (!valid(shape, chunk)) return "a chunk of " + std::to_string(chunk) + " samples for a batch of " + std::to_string(shape.n);
  std::shared_ptr<const Compiled> c = compiled(shape, pass, omp_get_max_threads(), chunk, /*primitives=*/true);
  if (!c->ok) return "oneDNN has no convolution kernel for this problem";
  if (c->total > workspaceBytes)
    return "oneDNN's convolution needs a workspace of " + std::to_string(c->total) + " bytes, the plan holds " +
           std::to_string(workspaceBytes);
  dnnl::engine& engine = cpuEngine();
  auto* base = static_cast<std::byte*>(workspace);
  dnnl::memory scratchpad(dnnl::memory::desc(Dims{c->scratchpadBytes}, DataType::u8, Tag::a), engine,
                          base + c->scratchpadOffset);
  dnnl::stream stream(engine);
  // The weights (read once) or the weight gradient (summed over the chunks).
  void* sharedUser = pass == ConvPass::WeightGrad ? buffers.gw : const_cast<void*>(buffers.w);
  dnnl::memory sharedPlain(c->sharedPlain, engine, sharedUser);
  dnnl::memory shared = c->sharedCopied ? dnnl::memory(c->full.shared, engine, base) : sharedPlain;
  if (c->sharedCopied && !c->sharedOutput)
    c->sharedReorder.execute(stream, {{DNNL_ARG_FROM, sharedPlain}, {DNNL_ARG_TO, shared}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
  for (std::int64_t start = 0; start < shape.n; start += c->chunk) {
    const Variant& v = shape.n - start >= c->chunk ? c->full : c->rest;
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, scratchpad}, {c->sharedArg, shared}};
    if (pass == ConvPass::Forward && shape.bias)
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(dnnl::memory::desc(Dims{shape.o}, DataType::f32, Tag::a), engine,
                                               const_cast<void*>(buffers.bias)));
    std::vector<std::pair<const Batched*, dnnl::memory>> plainOutputs;
    for (std::size_t i = 0; i < v.batched.size(); ++i) {
      const Batched& b = v.batched[i];
      auto* user = static_cast<std::byte*>(const_cast<void*>(batchedPointer(b.arg, buffers))) + start * b.sampleBytes;
      dnnl::memory plain(b.plain, engine, user);
      if (!b.reordered) {
        args.emplace(b.arg, plain);
        continue;
      }
      dnnl::memory blocked(b.kernel, engine, base + c->slots[i]);
      args.emplace(b.arg, blocked);
      if (b.output)
        plainOutputs.push_back({&b, plain});
      else
        b.reorder.execute(stream, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, blocked}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    }
    v.primitive.execute(stream, args);
    for (auto& [b, plain] : plainOutputs)
      b->reorder.execute(stream, {{DNNL_ARG_FROM, args.at(b->arg)}, {DNNL_ARG_TO, plain}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    if (c->sharedCopied && c->sharedOutput) {
      const dnnl::reorder& into = start == 0 ? c->sharedReorder : c->accumulate;
      into.execute(stream, {{DNNL_ARG_FROM, shared}, {DNNL_ARG_TO, sharedPlain}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
    }
  }
  stream.wait();
  return {};
}

std::string convImplementation(const ConvShape& shape, ConvPass pass, int threads) {
  if (!valid(shape, shape.n)) return {};
  std::shared_ptr<const Compiled> c = compiled(shape, pass, threads, shape.n);
  return c->ok ? c->full.implementation : std::string();
}

#else  // !GRADC_WITH_ONEDNN

std::optional<std::int64_t> convWorkspaceBytes(const ConvShape&, ConvPass, int, std::int64_t) { return std::nullopt; }
std::optional<ConvChunking> convChunking(const ConvShape&, ConvPass, int, std::int64_t) { return std::nullopt; }
std::string runConv(const ConvShape&, ConvPass, std::int64_t, const ConvBuffers&, void*, std::int64_t) {
  return "gradc was built without oneDNN";
}
std::string convImplementation(const ConvShape&, ConvPass, int) { return {}; }

#endif

}  // namespace gradc::onednn
