// IR text in, IR text out, for the passes that reshape a training step: micro-batching, the
// data-parallel partition and collectives, ZeRO's state sharding and remat. No YAML frontend:
// each case states its input graph and the graph it expects (tests/passes/ir_text.h).
#include <doctest/doctest.h>

#include <string>

#include "passes/data_parallel.h"
#include "passes/micro_batch.h"
#include "passes/optimizer.h"
#include "passes/remat.h"
#include "passes/shard_state.h"
#include "tests/passes/ir_text.h"

namespace gradc {
namespace {

using testing::runOnText;
using testing::take;

// A one-layer regression model, forward only.
const char* kForward = R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[8, 3] fwd  # fc
  %1 = mse(%0, %y) : f32[] fwd  # loss
  output loss = %1
)";

passes::DataParallelOptions ranks(int world, int rank, int shard = 0) {
  passes::DataParallelOptions o;
  o.world = world;
  o.rank = rank;
  o.shard = static_cast<passes::ZeroStage>(shard);
  return o;
}

TEST_CASE("pass text: micro-batch splits the batch in two and accumulates the gradients") {
  const std::string out =
      runOnText(kForward, [](ir::Graph& g) { return take(g, passes::microBatchedGradients(g, 2)); });
  CHECK(out == R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = slice(%x) {dim = 0, end = 4, start = 0} : f32[4, 4] fwd  # x
  %1 = slice(%y) {dim = 0, end = 4, start = 0} : f32[4, 3] fwd  # y
  %2 = linear(%0, %fc.weight, %fc.bias) : f32[4, 3] fwd  # fc
  %3 = mse(%2, %1) : f32[] fwd  # loss
  %4 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %5 = mse_backward(%4, %2, %1) : f32[4, 3] bwd  # loss
  %6 = linear_weight_grad(%5, %0) : f32[3, 4] bwd  # fc
  %7 = sum_to(%5) {shape = [3]} : f32[3] bwd  # fc
  %8 = slice(%x) {dim = 0, end = 8, start = 4} : f32[4, 4] fwd  # x
  %9 = slice(%y) {dim = 0, end = 8, start = 4} : f32[4, 3] fwd  # y
  %10 = linear(%8, %fc.weight, %fc.bias) : f32[4, 3] fwd  # fc
  %11 = mse(%10, %9) : f32[] fwd  # loss
  %12 = add(%3, %11) : f32[] fwd  # micro_batch
  %13 = scale(%12) {factor = 0.5} : f32[] fwd  # micro_batch
  %14 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %15 = mse_backward(%14, %10, %9) : f32[4, 3] bwd  # loss
  %16 = linear_weight_grad(%15, %8) : f32[3, 4] bwd  # fc
  %17 = sum_to(%15) {shape = [3]} : f32[3] bwd  # fc
  %18 = add(%6, %16) : f32[3, 4] bwd  # micro_batch
  %19 = add(%7, %17) : f32[3] bwd  # micro_batch
  %20 = scale(%18) {factor = 0.5} : f32[3, 4] bwd  # micro_batch
  %21 = scale(%19) {factor = 0.5} : f32[3] bwd  # micro_batch
  output loss = %13
  output grad.fc.weight = %20
  output grad.fc.bias = %21
)");
}

TEST_CASE("pass text: the data-parallel partition gives rank 1 its half of the batch") {
  const std::string out =
      runOnText(kForward, [](ir::Graph& g) { return take(g, passes::partitionForward(g, ranks(2, 1))); });
  CHECK(out == R"(graph g {rng_streams = 2}
  input %x : f32[4, 4]
  input %y : f32[4, 3]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[4, 3] fwd  # fc
  %1 = mse(%0, %y) : f32[] fwd  # loss
  %2 = scale(%1) {factor = 0.5} : f32[] fwd  # data_parallel
  output loss = %2
)");
}

TEST_CASE("pass text: collectives all-reduce the gradients; ZeRO-1 shards AdamW's state") {
  const std::string out = runOnText(kForward, [](ir::Graph& g) -> Status {
    const passes::DataParallelOptions o = ranks(2, 0, 1);
    if (Status s = take(g, passes::partitionForward(g, o)); !s) return s;
    if (Status s = take(g, passes::microBatchedGradients(g, 1)); !s) return s;
    if (Status s = passes::insertCollectives(g, o); !s) return s;
    passes::OptimizerOptions adamw;
    if (Expected<bool> r = passes::OptimizerPass(adamw).run(g); !r) return r.error();
    return passes::shardOptimizerState(g, o);
  });
  CHECK(out == R"(graph g {rng_streams = 2}
  input %x : f32[4, 4]
  input %y : f32[4, 3]
  input %step : i64[]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  param %opt.adam_m.bucket0 : f32[8] {init = "zeros", of = "gradient bucket 0.shard", role = "opt_state", shard_of = "fc.weight,fc.bias", shard_offset = 0, shard_prefix = "opt.adam_m.", shard_world = 2}
  param %opt.adam_v.bucket0 : f32[8] {init = "zeros", of = "gradient bucket 0.shard", role = "opt_state", shard_of = "fc.weight,fc.bias", shard_offset = 0, shard_prefix = "opt.adam_v.", shard_world = 2}
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[4, 3] fwd  # fc
  %1 = mse(%0, %y) : f32[] fwd  # loss
  %2 = scale(%1) {factor = 0.5} : f32[] fwd  # data_parallel
  %3 = all_reduce_start(%2) {bucket = -1, seq = 0, world = 2} : f32[1] comm  # data_parallel
  %4 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # data_parallel
  %5 = scale(%4) {factor = 0.5} : f32[] bwd  # data_parallel
  %6 = mse_backward(%5, %0, %y) : f32[4, 3] bwd  # loss
  %7 = linear_weight_grad(%6, %x) : f32[3, 4] bwd  # fc
  %8 = sum_to(%6) {shape = [3]} : f32[3] bwd  # fc
  %9 = all_reduce_start(%7, %8) {bucket = 0, seq = 1, world = 2} : f32[15] comm  # data_parallel
  %10 = all_reduce_wait(%3) {bucket = -1, part_ranks = [0], part_shapes = [], seq = 0, world = 2} : f32[] comm  # data_parallel
  %11, %12 = all_reduce_wait(%9) {bucket = 0, part_ranks = [2, 1], part_shapes = [3, 4, 3], seq = 1, world = 2} : f32[3, 4], f32[3] comm  # data_parallel
  %13 = lr_schedule(%step) {lr = 0.001, min_lr = 1e-04, total_steps = 1, warmup_steps = 0} : f32[] opt  # optimizer
  %14 = full() {dtype = f32, shape = [], value = 1.0} : f32[] opt  # optimizer
  %15 = adamw_shard_step(%fc.weight, %fc.bias, %11, %12, %opt.adam_m.bucket0, %opt.adam_v.bucket0, %13, %step, %14) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, grad_shard = false, offset = 0, parts = 2, shard = 8, weight_decay = 0.01} : f32[8] opt  # shard_state
  all_gather_params(%fc.weight, %fc.bias, %15) {bucket = 0, rank = 0, seq = 2, world = 2} : () comm  # shard_state
  output loss = %10
  output lr = %13
)");
}

// Three tanh layers: memory-poor keeps only the chain's input and recomputes the rest.
const char* kChain = R"(graph g
  input %x : f32[4, 8]
  param %w : f32[8]
  %0 = mul(%x, %w) : f32[4, 8] fwd  # l0
  %1 = tanh(%0) : f32[4, 8] fwd  # l0
  %2 = tanh(%1) : f32[4, 8] fwd  # l1
  %3 = tanh(%2) : f32[4, 8] fwd  # l2
  %4 = sum(%3) {dims = [0, 1], keepdim = false} : f32[] fwd  # loss
  output loss = %4
)";

TEST_CASE("pass text: remat memory-poor recomputes the chain in the backward") {
  const std::string out = runOnText(kChain, [](ir::Graph& g) -> Status {
    if (Status s = take(g, passes::microBatchedGradients(g, 1)); !s) return s;
    if (Expected<bool> r = passes::RematPass(passes::RematStrategy::MemoryPoor).run(g); !r) return r.error();
    return {};
  });
  CHECK(out == R"(graph g
  input %x : f32[4, 8]
  param %w : f32[8]
  %0 = mul(%x, %w) : f32[4, 8] fwd  # l0
  %1 = tanh(%0) : f32[4, 8] fwd  # l0
  %2 = tanh(%1) : f32[4, 8] fwd  # l1
  %3 = tanh(%2) : f32[4, 8] fwd  # l2
  %4 = sum(%3) {dims = [0, 1], keepdim = false} : f32[] fwd  # loss
  %5 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %6 = reshape(%5) {shape = [1, 1]} : f32[1, 1] bwd  # loss
  %7 = full() {dtype = f32, shape = [4, 8], value = 0.0} : f32[4, 8] bwd  # loss
  %8 = add(%7, %6) : f32[4, 8] bwd  # loss
  %9 = tanh_backward(%8, %3) : f32[4, 8] bwd  # l2
  %10 = mul(%x, %w) : f32[4, 8] recompute  # l0
  %11 = tanh(%10) : f32[4, 8] recompute  # l0
  %12 = tanh(%11) : f32[4, 8] recompute  # l1
  %13 = tanh_backward(%9, %12) : f32[4, 8] bwd  # l1
  %14 = mul(%x, %w) : f32[4, 8] recompute  # l0
  %15 = tanh(%14) : f32[4, 8] recompute  # l0
  %16 = tanh_backward(%13, %15) : f32[4, 8] bwd  # l0
  %17 = mul(%16, %x) : f32[4, 8] bwd  # l0
  %18 = sum_to(%17) {shape = [8]} : f32[8] bwd  # l0
  output loss = %4
  output grad.w = %18
)");
}

}  // namespace
}  // namespace gradc
