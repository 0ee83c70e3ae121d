// Convolutions on oneDNN's blocked kernels (see conv.h). Per (shape, pass, thread count), built
// once and cached: the convolution's primitive descriptor (its layouts chosen by oneDNN: format
// `any`), one reorder per operand whose chosen layout is not the plain one, and the workspace's
// layout. Planning asks only for sizes; the primitives (JIT-compiled code) are built on the first
// run. The workspace:
// [blocked copies, each 64-byte aligned][one scratchpad region, shared by the convolution and
// the reorders, which run one after another].
#include "onednn/conv.h"

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
using detail::ThreadsScope;

constexpr std::int64_t kAlignment = 64;

std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// One operand of the pass: its plain layout (the caller's memory), the layout the kernel reads
// or writes, and, when they differ, the blocked copy's place in the workspace and the reorder.
struct Operand {
  int arg = 0;
  bool output = false;
  dnnl::memory::desc plain, kernel;
  bool reordered = false;
  std::int64_t offset = 0;
  dnnl::reorder::primitive_desc reorderDesc;
  dnnl::reorder reorder;  // built on the first run
};

struct Compiled {
  bool ok = false;
  std::string implementation;
  std::function<dnnl::primitive()> makePrimitive;
  dnnl::primitive primitive;  // built on the first run
  bool built = false;
  std::vector<Operand> operands;
  std::int64_t scratchpadOffset = 0, scratchpadBytes = 0, total = 0;
};

struct Descs {
  dnnl::memory::desc srcPlain, weightsPlain, dstPlain, biasPlain;
  dnnl::memory::desc srcAny, weightsAny, dstAny;
  Dims strides, dilation, padding;
};

Descs descsOf(const ConvShape& s) {
  Descs d;
  const Dims src{s.n, s.c, s.h, s.w}, dst{s.n, s.o, s.oh, s.ow};
  const Dims weights = s.groups > 1 ? Dims{s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw}
                                    : Dims{s.o, s.c, s.kh, s.kw};
  d.srcPlain = dnnl::memory::desc(src, DataType::f32, Tag::nchw);
  d.dstPlain = dnnl::memory::desc(dst, DataType::f32, Tag::nchw);
  d.weightsPlain = dnnl::memory::desc(weights, DataType::f32, s.groups > 1 ? Tag::goihw : Tag::oihw);
  d.biasPlain = dnnl::memory::desc(Dims{s.o}, DataType::f32, Tag::a);
  d.srcAny = dnnl::memory::desc(src, DataType::f32, Tag::any);
  d.dstAny = dnnl::memory::desc(dst, DataType::f32, Tag::any);
  d.weightsAny = dnnl::memory::desc(weights, DataType::f32, Tag::any);
  d.strides = {s.stride[0], s.stride[1]};
  d.dilation = {s.dilation[0] - 1, s.dilation[1] - 1};  // oneDNN counts the gaps
  d.padding = {s.padding[0], s.padding[1]};
  return d;
}

std::vector<std::int64_t> keyOf(const ConvShape& s, ConvPass pass, int threads) {
  return {threads, static_cast<std::int64_t>(pass), s.n, s.c, s.h, s.w, s.o, s.kh, s.kw, s.oh, s.ow,
          s.stride[0], s.stride[1], s.padding[0], s.padding[1], s.dilation[0], s.dilation[1], s.groups, s.bias};
}

std::mutex cacheMutex;
std::map<std::vector<std::int64_t>, std::shared_ptr<Compiled>> cache;

dnnl::primitive_attr userScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Lays the pass's operands out in the workspace and describes their reorders (built on the first run).
void layOut(Compiled& c, std::int64_t primitiveScratchpad) {
  std::int64_t offset = 0, scratchpad = primitiveScratchpad;
  for (Operand& op : c.operands) {
    op.reordered = op.plain != op.kernel;
    if (!op.reordered) continue;
    op.offset = offset;
    offset += aligned(static_cast<std::int64_t>(op.kernel.get_size()));
    dnnl::reorder::primitive_desc pd = op.output
        ? dnnl::reorder::primitive_desc(cpuEngine(), op.kernel, cpuEngine(), op.plain, userScratchpad())
        : dnnl::reorder::primitive_desc(cpuEngine(), op.plain, cpuEngine(), op.kernel, userScratchpad());
    scratchpad = std::max(scratchpad, static_cast<std::int64_t>(pd.scratchpad_desc().get_size()));
    op.reorderDesc = pd;
  }
  c.scratchpadOffset = offset;
  c.scratchpadBytes = scratchpad;
  c.total = offset + aligned(scratchpad);
}

std::shared_ptr<Compiled> build(const ConvShape& s, ConvPass pass, int threads) {
  auto c = std::make_shared<Compiled>();
  ThreadsScope scope(threads);
  const Descs d = descsOf(s);
  const dnnl::primitive_attr attr = userScratchpad();
  try {
    const bool bias = pass == ConvPass::Forward && s.bias;
    dnnl::convolution_forward::desc fd =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               d.srcAny, d.weightsAny, d.biasPlain, d.dstAny, d.strides, d.dilation,
                                               d.padding, d.padding)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                               d.srcAny, d.weightsAny, d.dstAny, d.strides, d.dilation, d.padding,
                                               d.padding);
    dnnl::convolution_forward::primitive_desc fpd(fd, attr, cpuEngine());
    std::int64_t scratchpad = 0;
    switch (pass) {
      case ConvPass::Forward: {
        c->implementation = fpd.impl_info_str();
        c->operands = {{DNNL_ARG_SRC, false, d.srcPlain, fpd.src_desc()},
                       {DNNL_ARG_WEIGHTS, false, d.weightsPlain, fpd.weights_desc()},
                       {DNNL_ARG_DST, true, d.dstPlain, fpd.dst_desc()}};
        if (bias) c->operands.push_back({DNNL_ARG_BIAS, false, d.biasPlain, fpd.bias_desc()});
        scratchpad = static_cast<std::int64_t>(fpd.scratchpad_desc().get_size());
        c->makePrimitive = [fpd] { return dnnl::convolution_forward(fpd); };
        break;
      }
      case ConvPass::InputGrad: {
        dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, d.srcAny, d.weightsAny, d.dstAny,
                                                 d.strides, d.dilation, d.padding, d.padding);
        dnnl::convolution_backward_data::primitive_desc pd(bd, attr, cpuEngine(), fpd);
        c->implementation = pd.impl_info_str();
        c->operands = {{DNNL_ARG_DIFF_DST, false, d.dstPlain, pd.diff_dst_desc()},
                       {DNNL_ARG_WEIGHTS, false, d.weightsPlain, pd.weights_desc()},
                       {DNNL_ARG_DIFF_SRC, true, d.srcPlain, pd.diff_src_desc()}};
        scratchpad = static_cast<std::int64_t>(pd.scratchpad_desc().get_size());
        c->makePrimitive = [pd] { return dnnl::convolution_backward_data(pd); };
        break;
      }
      case ConvPass::WeightGrad: {
        dnnl::convolution_backward_weights::desc bd(dnnl::algorithm::convolution_direct, d.srcAny, d.weightsAny,
                                                    d.dstAny, d.strides, d.dilation, d.padding, d.padding);
        dnnl::convolution_backward_weights::primitive_desc pd(bd, attr, cpuEngine(), fpd);
        c->implementation = pd.impl_info_str();
        c->operands = {{DNNL_ARG_SRC, false, d.srcPlain, pd.src_desc()},
                       {DNNL_ARG_DIFF_DST, false, d.dstPlain, pd.diff_dst_desc()},
                       {DNNL_ARG_DIFF_WEIGHTS, true, d.weightsPlain, pd.diff_weights_desc()}};
        scratchpad = static_cast<std::int64_t>(pd.scratchpad_desc().get_size());
        c->makePrimitive = [pd] { return dnnl::convolution_backward_weights(pd); };
        break;
      }
    }
    if (detail::isReference(c->implementation.c_str())) return c;
    layOut(*c, scratchpad);
    c->ok = true;
  } catch (const dnnl::error&) {
    c->ok = false;  // no implementation: the caller's own kernel runs
  }
  return c;
}

// The cached entry; with `primitives`, its primitives built too (the first run's work).
std::shared_ptr<const Compiled> compiled(const ConvShape& s, ConvPass pass, int threads, bool primitives = false) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto [it, inserted] = cache.try_emplace(keyOf(s, pass, threads));
  if (inserted) it->second = build(s, pass, threads);
  Compiled& c = *it->second;
  if (primitives && c.ok && !c.built) {
    ThreadsScope scope(threads);
    c.primitive = c.makePrimitive();
    for (Operand& op : c.operands)
      if (op.reordered) op.reorder = dnnl::reorder(op.reorderDesc);
    c.built = true;
  }
  return it->second;
}

const void* plainPointer(const Operand& op, const ConvBuffers& b) {
  switch (op.arg) {
    case DNNL_ARG_SRC: return b.x;
    case DNNL_ARG_WEIGHTS: return b.w;
    case DNNL_ARG_BIAS: return b.bias;
    case DNNL_ARG_DST: return b.y;
    case DNNL_ARG_DIFF_DST: return b.gy;
    case DNNL_ARG_DIFF_SRC: return b.gx;
    case DNNL_ARG_DIFF_WEIGHTS: return b.gw;
  }
  return nullptr;
}

}  // namespace

std::optional<std::int64_t> convWorkspaceBytes(const ConvShape& shape, ConvPass pass, int threads) {
  if (shape.n <= 0 || shape.groups <= 0 || shape.o % shape.groups != 0 || shape.c % shape.groups != 0)
    return std::nullopt;
  std::shared_ptr<const Compiled> c = compiled(shape, pass, threads);
  if (!c->ok) return std::nullopt;
  return c->total;
}

std::string runConv(const ConvShape& shape, ConvPass pass, const ConvBuffers& buffers, void* workspace,
                    std::int64_t workspaceBytes) {
  std::shared_ptr<const Compiled> c = compiled(shape, pass, omp_get_max_threads(), /*primitives=*/true);
  if (!c->ok) return "oneDNN has no convolution kernel for this problem";
  if (c->total > workspaceBytes)
    return "oneDNN's convolution needs a workspace of " + std::to_string(c->total) + " bytes, the plan holds " +
           std::to_string(workspaceBytes);
  dnnl::engine& engine = cpuEngine();
  auto* base = static_cast<std::byte*>(workspace);
  dnnl::memory scratchpad(dnnl::memory::desc(Dims{c->scratchpadBytes}, DataType::u8, Tag::a), engine,
                          base + c->scratchpadOffset);
  dnnl::stream stream(engine);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SCRATCHPAD, scratchpad}};
  std::vector<std::pair<const Operand*, dnnl::memory>> plainOutputs;
  for (const Operand& op : c->operands) {
    dnnl::memory plain(op.plain, engine, const_cast<void*>(plainPointer(op, buffers)));
    if (!op.reordered) {
      args.emplace(op.arg, plain);
      continue;
    }
    dnnl::memory blocked(op.kernel, engine, base + op.offset);
    args.emplace(op.arg, blocked);
    if (op.output)
      plainOutputs.push_back({&op, plain});
    else
      op.reorder.execute(stream, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, blocked}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
  }
  c->primitive.execute(stream, args);
  for (auto& [op, plain] : plainOutputs)
    op->reorder.execute(stream, {{DNNL_ARG_FROM, args.at(op->arg)}, {DNNL_ARG_TO, plain}, {DNNL_ARG_SCRATCHPAD, scratchpad}});
  stream.wait();
  return {};
}

std::string convImplementation(const ConvShape& shape, ConvPass pass, int threads) {
  std::shared_ptr<const Compiled> c = compiled(shape, pass, threads);
  return c->ok ? c->implementation : std::string();
}

#else  // !GRADC_WITH_ONEDNN

std::optional<std::int64_t> convWorkspaceBytes(const ConvShape&, ConvPass, int) { return std::nullopt; }
std::string runConv(const ConvShape&, ConvPass, const ConvBuffers&, void*, std::int64_t) {
  return "gradc was built without oneDNN";
}
std::string convImplementation(const ConvShape&, ConvPass, int) { return {}; }

#endif

}  // namespace gradc::onednn
