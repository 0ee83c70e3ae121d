// Kernels of the collective ops (ir/ops_collective.cpp): communication between data-parallel
// ranks through the run's CollectiveContext (RunContext::collectives).
//
// all_reduce_start copies its operands into one fresh flat bucket and starts the sum on it;
// all_reduce_wait waits for it and returns views of the bucket's parts. gather, gather_send,
// scatter and scatter_recv block until done. ZeRO's reduce_scatter_start / reduce_scatter_wait
// work like the all-reduce pair but keep this rank's block of the sum in a fresh shard;
// all_gather_params blocks; ZeRO stage 3's all_gather_start / all_gather_wait gather a
// parameter bucket into a fresh buffer and return its parameters as views. A communication failure or timeout throws, and
// the executor reports it naming the node; the message itself names the rank, the collective
// and the step.
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <stdexcept>

#include "runtime/comm/collective_context.h"
#include "runtime/kernels/kernels.h"

namespace gradc::runtime {
namespace {

using namespace kernel_detail;
using Results = std::vector<at::Tensor>;

CollectiveContext& contextOf(const KernelArgs& a) {
  if (!a.ctx.collectives)
    throw std::runtime_error("this graph communicates with other ranks (it was compiled for data parallelism), "
                             "but it runs without a communicator");
  return *a.ctx.collectives;
}

void check(CollectiveContext& cc, const Status& s) {
  if (s) return;
  cc.recordFailure(s.message());
  throw std::runtime_error(s.message());
}

// The communicator of the group the node spans (ir/device_mesh.h).
Communicator& commOf(CollectiveContext& cc, const ir::Node& node) {
  Expected<Communicator*> comm = cc.commFor(node);
  if (!comm) check(cc, Status(comm.error()));
  return **comm;
}

// The operands one after another at the start of the flat bucket (strided operands are read in
// place, no temporary); returns the elements written.
std::int64_t packInto(const at::Tensor& bucket, std::span<const at::Tensor> operands) {
  std::int64_t at = 0;
  for (const at::Tensor& t : operands) {
    bucket.narrow(0, at, t.numel()).view(t.sizes()).copy_(t);
    at += t.numel();
  }
  return at;
}

Results allReduceStart(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  at::Tensor bucket = resultBuffer(a);
  packInto(bucket, a.operands);
  auto pending = commOf(cc, a.node).startAllReduceSum(bucket, CollectiveContext::describe(a.node, a.ctx.step));
  if (!pending) check(cc, Status(pending.error()));
  cc.started(&a.node, std::move(*pending));
  return {bucket};
}

// The node's results as views of consecutive parts of its flat operand, from its start.
Results bucketPartViews(const KernelArgs& a) {
  const at::Tensor& bucket = a.operands[0];
  Results parts;
  std::int64_t at = 0;
  for (size_t r = 0; r < a.node.numResults(); ++r) {
    const ir::TensorType& t = a.node.result(r)->type();
    const std::int64_t n = t.numel();
    parts.push_back(bucket.narrow(0, at, n).view(std::vector<std::int64_t>(t.shape.begin(), t.shape.end())));
    at += n;
  }
  return parts;
}

Results allReduceWait(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  check(cc, cc.wait(a.node.operand(0)->producer()));
  return bucketPartViews(a);
}

// The bucket padded to world x shard (ZeRO stage 2): the gradients, then zeros.
Results reduceScatterStart(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  at::Tensor bucket = resultBuffer(a);
  const std::int64_t at = packInto(bucket, a.operands);
  if (at < bucket.numel()) bucket.narrow(0, at, bucket.numel() - at).zero_();
  auto pending = commOf(cc, a.node).startReduceScatterSum(bucket, CollectiveContext::describe(a.node, a.ctx.step));
  if (!pending) check(cc, Status(pending.error()));
  cc.started(&a.node, std::move(*pending));
  return {bucket};
}

// This rank's block of the summed bucket, into the fresh shard; the bucket dies here.
Results reduceScatterWait(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  check(cc, cc.wait(a.node.operand(0)->producer()));
  at::Tensor shard = resultBuffer(a);
  const std::int64_t s = shard.numel();
  shard.copy_(a.operands[0].narrow(0, intAttr(a.node, "rank") * s, s));
  return {shard};
}

// Every rank's updated shard into one world x shard buffer (the declared workspace), then back
// into the parameters.
Results allGatherParams(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  const at::Tensor shard = a.operands.back().contiguous();
  at::Tensor gathered = at::empty({intAttr(a.node, "world") * shard.numel()}, shard.options());
  const std::string what = CollectiveContext::describe(a.node, a.ctx.step);
  check(cc, cc.blocking([&] { return commOf(cc, a.node).allGather(shard, gathered, what); }));
  std::int64_t at = 0;
  for (size_t i = 0; i + 1 < a.operands.size(); ++i) {
    const at::Tensor& p = a.operands[i];
    p.view({-1}).copy_(gathered.narrow(0, at, p.numel()));
    at += p.numel();
  }
  return {};
}

// This rank's parameter shard into its block of the fresh buffer, the others' gathered into theirs.
Results allGatherStart(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  at::Tensor buffer = resultBuffer(a);
  const std::int64_t s = a.operands[0].numel();
  buffer.narrow(0, intAttr(a.node, "rank") * s, s).copy_(a.operands[0]);
  auto pending = commOf(cc, a.node).startAllGather(buffer, CollectiveContext::describe(a.node, a.ctx.step));
  if (!pending) check(cc, Status(pending.error()));
  cc.started(&a.node, std::move(*pending));
  return {buffer};
}

// The bucket's parameters: views of the gathered buffer's first elements.
Results allGatherWait(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  check(cc, cc.wait(a.node.operand(0)->producer()));
  return bucketPartViews(a);
}

int rootOf(const ir::Node& n) { return static_cast<int>(intAttr(n, "root")); }

Results gatherKernel(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  const std::string what = CollectiveContext::describe(a.node, a.ctx.step);
  Results out;  // every result first, then one gather each (the planner's workspace model)
  for (size_t i = 0; i < a.operands.size(); ++i) out.push_back(resultBuffer(a, i));
  for (size_t i = 0; i < a.operands.size(); ++i)
    check(cc, cc.blocking([&] { return commOf(cc, a.node).gather(a.operands[i].contiguous(), out[i], rootOf(a.node), what); }));
  return out;
}

Results gatherSendKernel(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  const std::string what = CollectiveContext::describe(a.node, a.ctx.step);
  for (const at::Tensor& t : a.operands)
    check(cc, cc.blocking([&] { return commOf(cc, a.node).gather(t.contiguous(), at::Tensor(), rootOf(a.node), what); }));
  return {resultBuffer(a).zero_()};
}

Results scatterKernel(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  at::Tensor result = resultBuffer(a);
  const std::string what = CollectiveContext::describe(a.node, a.ctx.step);
  check(cc, cc.blocking([&] { return commOf(cc, a.node).scatter(a.operands[0].contiguous(), result, rootOf(a.node), what); }));
  return {result};
}

Results scatterRecvKernel(const KernelArgs& a) {
  CollectiveContext& cc = contextOf(a);
  at::Tensor result = resultBuffer(a);
  const std::string what = CollectiveContext::describe(a.node, a.ctx.step);
  check(cc, cc.blocking([&] { return commOf(cc, a.node).scatter(at::Tensor(), result, rootOf(a.node), what); }));
  return {result};
}

constexpr KernelEntry kCollectiveKernels[] = {
    {"all_reduce_start", allReduceStart}, {"all_reduce_wait", allReduceWait},  {"gather", gatherKernel},
    {"gather_send", gatherSendKernel},    {"scatter", scatterKernel},          {"scatter_recv", scatterRecvKernel},
    {"reduce_scatter_start", reduceScatterStart}, {"reduce_scatter_wait", reduceScatterWait},
    {"all_gather_params", allGatherParams}, {"all_gather_start", allGatherStart}, {"all_gather_wait", allGatherWait},
};

}  // namespace

std::span<const KernelEntry> collectiveKernels() { return kCollectiveKernels; }

}  // namespace gradc::runtime
