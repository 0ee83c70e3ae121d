// Shape and dtype inference for every op in the table: one accepted case with its exact
// result types, and rejected cases with the words the error must contain. The last test
// fails when an op is added to the table without cases here.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_table.h"
#include "tests/ir/op_cases.h"

using namespace gradc;
using namespace gradc::ir;

namespace {

using namespace gradc::ir::op_cases;

AttrMap pool(std::int64_t kernel, std::int64_t stride, std::int64_t padding, bool ceil) {
  return {{"kernel", std::vector<std::int64_t>{kernel, kernel}},
          {"stride", std::vector<std::int64_t>{stride, stride}},
          {"padding", std::vector<std::int64_t>{padding, padding}},
          {"dilation", std::vector<std::int64_t>{1, 1}},
          {"ceil_mode", ceil}};
}
AttrMap avgPool(std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  return {{"kernel", std::vector<std::int64_t>{kernel, kernel}},
          {"stride", std::vector<std::int64_t>{stride, stride}},
          {"padding", std::vector<std::int64_t>{padding, padding}},
          {"ceil_mode", false},
          {"count_include_pad", true}};
}
AttrMap withShape(AttrMap attrs, const char* key, std::vector<std::int64_t> shape) {
  attrs[key] = std::move(shape);
  return attrs;
}

struct Case {
  std::string op;
  std::vector<TensorType> inputs;
  AttrMap attrs;
  std::vector<TensorType> expected;  // empty and no error text: accepted with no results
  std::string errorContains;          // non-empty: must fail with this text
};

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
      {"embedding", {f32({256, 64}), i64({16, 128})}, {}, {f32({16, 128, 64})}},
      {"sum", {f32({3, 4, 5})}, {{"dims", std::vector<std::int64_t>{0, 2}}, {"keepdim", false}}, {f32({4})}},
      {"sum", {f32({3, 4, 5})}, {{"dims", std::vector<std::int64_t>{}}, {"keepdim", true}}, {f32({1, 1, 1})}},
      {"sum", {f32({3, 4})}, {{"dims", std::vector<std::int64_t>{2}}, {"keepdim", false}}, {}, "not an axis"},
      {"mean", {f32({3, 4})}, {{"dims", std::vector<std::int64_t>{}}, {"keepdim", false}}, {f32({})}},
      {"mean", {f32({3, 4})}, {{"dims", std::vector<std::int64_t>{1, 0}}, {"keepdim", false}}, {}, "distinct and ascending"},
      {"silu", {f32({5, 3})}, {}, {f32({5, 3})}},
      {"silu", {i64({5})}, {}, {}, "floating-point"},
      {"silu_backward", {f32({5, 3}), f32({5, 3})}, {}, {f32({5, 3})}},
      {"silu_backward", {f32({5, 3}), f32({5, 4})}, {}, {}, "must have one type"},
      {"attention", {f32({2, 3, 5, 4}), f32({2, 3, 7, 4}), f32({2, 3, 7, 6})}, {{"causal", true}, {"scale", 0.5}},
       {f32({2, 3, 5, 6}), f32({2, 3, 5})}},
      {"attention", {f32({2, 3, 5, 4}), f32({2, 1, 7, 4}), f32({2, 1, 7, 4})}, {{"causal", false}, {"scale", 0.5}},
       {f32({2, 3, 5, 4}), f32({2, 3, 5})}},  // a key head shared by 3 query heads
      {"attention", {f32({2, 3, 5, 4}), f32({2, 2, 7, 4}), f32({2, 2, 7, 4})}, {{"causal", false}, {"scale", 0.5}}, {},
       "must equal q's or be 1"},
      {"attention", {f32({2, 5, 4}), f32({2, 7, 4}), f32({2, 7, 4})}, {{"causal", true}, {"scale", 0.5}, {"p", 0.1}}, {},
       "needs the rng attribute"},
      {"attention", {bf16({2, 5, 4}), bf16({2, 7, 4}), bf16({2, 7, 4})}, {{"causal", true}, {"scale", 0.5}}, {},
       "must be f32 or f64"},
      {"attention_backward",
       {f32({2, 5, 6}), f32({2, 5, 4}), f32({2, 7, 4}), f32({2, 7, 6}), f32({2, 5, 6}), f32({2, 5})},
       {{"causal", true}, {"scale", 0.5}}, {f32({2, 5, 4}), f32({2, 7, 4}), f32({2, 7, 6})}},
      {"attention_backward",
       {f32({2, 5, 6}), f32({2, 5, 4}), f32({2, 7, 4}), f32({2, 7, 6}), f32({2, 5, 6}), f32({2, 5, 1})},
       {{"causal", true}, {"scale", 0.5}}, {}, "log-sum-exp must be f32[2, 5]"},
      {"exp", {f32({2})}, {}, {f32({2})}},
      {"fused", {f32({4, 8}), f32({8})},
       {{"body", std::string("%0 = add($0, $1); %1 = gelu(%0) {approximate = tanh}; return %1, %0")}},
       {f32({4, 8}), f32({4, 8})}},
      {"fused", {f32({4, 8}), f32({3})}, {{"body", std::string("%0 = add($0, $1); return %0")}}, {}, "do not broadcast"},
      {"fused", {f32({8}), f32({4, 8})}, {{"body", std::string("%0 = relu($0); %1 = mul(%0, $1); return %1")}}, {},
       "not the iteration space"},
      {"fused", {f32({4})}, {{"body", std::string("%0 = softmax($0) {dim = 0}; return %0")}}, {}, "cannot be fused"},
      {"fused", {bf16({4})}, {{"body", std::string("%0 = relu($0); return %0")}}, {}, "fused bodies compute f32 or f64"},
      {"exp", {i64({2})}, {}, {}, "floating-point"},
      {"rms_norm", {f32({4, 6, 8}), f32({8})}, {{"eps", 1e-6}}, {f32({4, 6, 8}), f32({4, 6, 1})}},
      {"rms_norm", {f32({4, 8}), f32({7})}, {{"eps", 1e-6}}, {}, "weight must be f32[8]"},
      {"rms_norm", {f32({4, 8}), f32({8})}, {{"eps", -1.0}}, {}, "eps must be positive"},
      {"rms_norm_backward", {f32({4, 8}), f32({4, 8}), f32({4, 1}), f32({8})}, {}, {f32({4, 8}), f32({8})}},
      {"rms_norm_backward", {f32({4, 8}), f32({4, 8}), f32({4, 8}), f32({8})}, {}, {}, "rstd must be f32[4, 1]"},
      {"rope", {f32({2, 16, 4, 8})}, {{"base", 1e4}, {"seq_dim", I(1)}, {"inverse", false}}, {f32({2, 16, 4, 8})}},
      {"rope", {f32({2, 16, 4, 7})}, {{"base", 1e4}, {"seq_dim", I(1)}, {"inverse", false}}, {}, "even extent"},
      {"rope", {f32({2, 16, 8})}, {{"base", 1e4}, {"seq_dim", I(-1)}, {"inverse", false}}, {}, "not an axis before the last"},
      {"embedding", {f32({256, 64}), f32({16, 128})}, {}, {}, "indices must be i64 or i32"},
      {"embedding", {f32({256}), i64({16})}, {}, {}, "weight must be [num, dim]"},
      {"add", {f32({16, 128, 256}), f32({128, 256})}, {}, {f32({16, 128, 256})}},
      {"add", {f32({4, 2}), f32({3})}, {}, {}, "do not broadcast"},
      {"add", {f32({4}), i64({4})}, {}, {}, "dtypes differ"},
      {"sub", {f32({4, 1}), f32({1, 3})}, {}, {f32({4, 3})}},
      {"sub", {i64({4}), i64({4})}, {}, {}, "floating-point"},
      {"mul", {f32({8, 4}), f32({8, 4})}, {}, {f32({8, 4})}},
      {"mul", {f32({8, 4}), f32({8, 5})}, {}, {}, "do not broadcast"},
      {"scale", {f32({3})}, {{"factor", 0.125}}, {f32({3})}},
      {"scale", {f32({3})}, {{"factor", I(2)}}, {}, "attribute 'factor' must be float"},
      {"scale", {f32({3})}, {}, {}, "missing attribute 'factor'"},
      {"matmul", {f32({2, 4, 8, 16}), f32({2, 4, 16, 8})}, {}, {f32({2, 4, 8, 8})}},
      {"matmul", {f32({8, 16}), f32({3, 16, 2})}, {}, {f32({3, 8, 2})}},
      {"matmul", {f32({8, 16}), f32({32, 8})}, {}, {}, "inner dimensions differ"},
      {"matmul", {f32({8}), f32({8, 2})}, {}, {}, "rank >= 2"},
      {"linear", {f32({16, 128, 256}), f32({1024, 256}), f32({1024})}, {}, {f32({16, 128, 1024})}},
      {"linear", {f32({16, 256}), f32({10, 256})}, {}, {f32({16, 10})}},
      {"linear", {f32({16, 255}), f32({10, 256})}, {}, {}, "input features 255 do not match"},
      {"linear", {f32({16, 256}), f32({10, 256}), f32({11})}, {}, {}, "bias must be f32[10]"},
      {"relu", {f32({5, 5})}, {}, {f32({5, 5})}},
      {"relu", {i64({5})}, {}, {}, "floating-point"},
      {"gelu", {f32({5})}, {{"approximate", std::string("tanh")}}, {f32({5})}},
      {"gelu", {f32({5})}, {}, {f32({5})}},
      {"gelu", {f32({5})}, {{"approximate", std::string("fast")}}, {}, "approximate must be"},
      {"tanh", {f32({5})}, {}, {f32({5})}},
      {"tanh", {f32({5}), f32({5})}, {}, {}, "expects 1 operand(s), got 2"},
      {"sigmoid", {f32({2, 3})}, {}, {f32({2, 3})}},
      {"sigmoid", {TensorType{DType::boolean, {2}}}, {}, {}, "floating-point"},
      {"softmax", {f32({2, 4, 8, 8})}, {{"dim", I(-1)}}, {f32({2, 4, 8, 8})}},
      {"softmax", {f32({2, 4})}, {{"dim", I(2)}}, {}, "dim 2 is out of range"},
      {"log_softmax", {f32({2, 4})}, {{"dim", I(1)}}, {f32({2, 4})}},
      {"log_softmax", {f32({2, 4})}, {{"axis", I(1)}}, {}, "unknown attribute 'axis'"},
      {"layer_norm", {f32({16, 128, 256}), f32({256}), f32({256})}, {{"eps", 1e-5}},
       {f32({16, 128, 256}), f32({16, 128, 1}), f32({16, 128, 1})}},
      {"layer_norm", {f32({16, 256}), f32({128}), f32({256})}, {{"eps", 1e-5}}, {}, "weight must be f32[256]"},
      {"layer_norm", {f32({16, 256}), f32({256}), f32({256})}, {{"eps", 0.0}}, {}, "eps must be positive"},
      {"dropout", {f32({4, 4})}, {{"p", 0.1}, {"rng", I(0)}}, {f32({4, 4})}},
      {"dropout", {f32({4, 4})}, {{"p", 1.0}, {"rng", I(0)}}, {}, "p must be in [0, 1)"},
      {"dropout", {f32({4, 4})}, {{"p", 0.1}}, {}, "missing attribute 'rng'"},
      {"causal_mask", {f32({2, 4, 8, 8})}, {}, {f32({2, 4, 8, 8})}},
      {"causal_mask", {f32({8})}, {}, {}, "rank >= 2"},
      {"reshape", {f32({16, 128, 256})}, {{"shape", std::vector<std::int64_t>{16, 128, 4, 64}}},
       {f32({16, 128, 4, 64})}},
      {"reshape", {f32({16, 128})}, {{"shape", std::vector<std::int64_t>{16, 127}}}, {}, "cannot reshape"},
      {"reshape", {f32({16})}, {{"shape", std::vector<std::int64_t>{-1, 16}}}, {}, "positive extents"},
      {"transpose", {f32({2, 3, 4, 5})}, {{"dim0", I(1)}, {"dim1", I(2)}}, {f32({2, 4, 3, 5})}},
      {"transpose", {f32({2, 3})}, {{"dim0", I(0)}, {"dim1", I(2)}}, {}, "out of range"},
      {"slice", {f32({512, 64})}, {{"dim", I(0)}, {"start", I(0)}, {"end", I(128)}}, {f32({128, 64})}},
      {"slice", {f32({512, 64})}, {{"dim", I(0)}, {"start", I(0)}, {"end", I(513)}}, {}, "out of range"},
      {"select", {f32({8, 512, 1024})}, {{"dim", I(1)}, {"index", I(7)}}, {f32({8, 1024})}},
      {"select", {f32({8, 4})}, {{"dim", I(1)}, {"index", I(4)}}, {}, "index 4 is out of range"},
      {"split", {f32({8, 1024})}, {{"dim", I(1)}, {"sections", I(4)}},
       {f32({8, 256}), f32({8, 256}), f32({8, 256}), f32({8, 256})}},
      {"split", {f32({8, 10})}, {{"dim", I(1)}, {"sections", I(4)}}, {}, "does not split into 4"},
      {"unbind", {f32({8, 3, 16})}, {{"dim", I(1)}}, {f32({8, 16}), f32({8, 16}), f32({8, 16})}},
      {"unbind", {f32({8, 3, 16})}, {{"dim", I(3)}}, {}, "dim is out of range"},
      {"stack", {f32({8, 16}), f32({8, 16}), f32({8, 16})}, {{"dim", I(1)}}, {f32({8, 3, 16})}},
      {"stack", {f32({8, 16}), f32({8, 15})}, {{"dim", I(0)}}, {}, "operand 1 is f32[8, 15]"},
      {"stack", {}, {{"dim", I(0)}}, {}, "at least 1"},
      {"zeros", {}, {{"shape", std::vector<std::int64_t>{8, 256}}, {"dtype", DType::f32}}, {f32({8, 256})}},
      {"zeros", {}, {{"shape", std::vector<std::int64_t>{8, 0}}, {"dtype", DType::f32}}, {}, "positive extents"},
      {"cross_entropy", {f32({32, 250, 40000}), i64({32, 250})}, {}, {f32({})}},
      {"cross_entropy", {f32({32, 250, 40000}), i64({32, 251})}, {}, {}, "needs target [32, 250]"},
      {"cross_entropy", {f32({4, 10}), f32({4})}, {}, {}, "class indices"},
      {"mse", {f32({64, 8}), f32({64, 8})}, {}, {f32({})}},
      {"mse", {f32({64, 8}), f32({64, 9})}, {}, {}, "same type"},
      // Training ops: backward kernels.
      {"sum_to", {f32({16, 128, 256})}, {{"shape", std::vector<std::int64_t>{256}}}, {f32({256})}},
      {"sum_to", {f32({4, 3})}, {{"shape", std::vector<std::int64_t>{4, 1}}}, {f32({4, 1})}},
      {"sum_to", {f32({4, 3})}, {{"shape", std::vector<std::int64_t>{2, 3}}}, {}, "not a broadcast"},
      {"relu_backward", {f32({4}), f32({4})}, {}, {f32({4})}},
      {"relu_backward", {f32({4}), f32({5})}, {}, {}, "same type"},
      {"gelu_backward", {f32({4}), f32({4})}, {{"approximate", std::string("tanh")}}, {f32({4})}},
      {"gelu_backward", {f32({4}), f32({4})}, {{"approximate", std::string("x")}}, {}, "approximate must be"},
      {"tanh_backward", {f32({4}), f32({4})}, {}, {f32({4})}},
      {"tanh_backward", {i64({4}), i64({4})}, {}, {}, "floating-point"},
      {"sigmoid_backward", {f32({4}), f32({4})}, {}, {f32({4})}},
      {"sigmoid_backward", {f32({4})}, {}, {}, "expects 2 operand(s)"},
      {"softmax_backward", {f32({2, 8}), f32({2, 8})}, {{"dim", I(-1)}}, {f32({2, 8})}},
      {"softmax_backward", {f32({2, 8}), f32({2, 8})}, {{"dim", I(2)}}, {}, "out of range"},
      {"log_softmax_backward", {f32({2, 8}), f32({2, 8})}, {{"dim", I(1)}}, {f32({2, 8})}},
      {"log_softmax_backward", {f32({2, 8}), f32({2, 7})}, {{"dim", I(1)}}, {}, "same type"},
      {"layer_norm_backward", {f32({4, 8}), f32({4, 8}), f32({4, 1}), f32({4, 1}), f32({8}), f32({8})}, {},
       {f32({4, 8}), f32({8}), f32({8})}},
      {"layer_norm_backward", {f32({4, 8}), f32({4, 8}), f32({4, 8}), f32({4, 1}), f32({8}), f32({8})}, {}, {},
       "mean must be f32[4, 1]"},
      {"causal_mask_backward", {f32({2, 8, 8})}, {}, {f32({2, 8, 8})}},
      {"causal_mask_backward", {i64({2, 8, 8})}, {}, {}, "floating-point"},
      {"slice_backward", {f32({128, 64})},
       {{"dim", I(0)}, {"start", I(0)}, {"end", I(128)}, {"input_shape", std::vector<std::int64_t>{512, 64}}},
       {f32({512, 64})}},
      {"slice_backward", {f32({100, 64})},
       {{"dim", I(0)}, {"start", I(0)}, {"end", I(128)}, {"input_shape", std::vector<std::int64_t>{512, 64}}}, {},
       "the gradient must be [128, 64]"},
      {"select_backward", {f32({8, 1024})},
       {{"dim", I(1)}, {"index", I(3)}, {"input_shape", std::vector<std::int64_t>{8, 512, 1024}}},
       {f32({8, 512, 1024})}},
      {"select_backward", {f32({8, 1024})},
       {{"dim", I(1)}, {"index", I(512)}, {"input_shape", std::vector<std::int64_t>{8, 512, 1024}}}, {},
       "index out of range"},
      {"concat", {f32({8, 256}), f32({8, 256}), f32({8, 512})}, {{"dim", I(1)}}, {f32({8, 1024})}},
      {"concat", {f32({8, 256}), f32({7, 256})}, {{"dim", I(1)}}, {}, "does not concatenate"},
      {"embedding_backward", {f32({16, 128, 64}), i64({16, 128})}, {{"num", I(256)}}, {f32({256, 64})}},
      {"embedding_backward", {f32({16, 127, 64}), i64({16, 128})}, {{"num", I(256)}}, {}, "does not fit indices"},
      {"linear_cross_entropy", {f32({32, 250, 768}), f32({40000, 768}), i64({32, 250})}, {{"chunks", I(16)}},
       {f32({}), f32({32, 250, 768}), f32({40000, 768})}},
      {"linear_cross_entropy", {f32({8, 16}), f32({50, 16}), i64({8}), f32({50})}, {{"chunks", I(3)}},
       {f32({}), f32({8, 16}), f32({50, 16}), f32({50})}},
      {"linear_cross_entropy", {f32({8, 16}), f32({50, 15}), i64({8})}, {{"chunks", I(1)}}, {}, "do not match"},
      {"linear_cross_entropy", {f32({8, 16}), f32({50, 16}), i64({9})}, {{"chunks", I(1)}}, {}, "needs target [8]"},
      {"linear_cross_entropy", {f32({8, 16}), f32({50, 16}), f32({8})}, {{"chunks", I(1)}}, {}, "class indices"},
      {"linear_cross_entropy", {f32({8, 16}), f32({50, 16}), i64({8}), f32({49})}, {{"chunks", I(1)}}, {},
       "bias must be"},
      {"linear_cross_entropy", {f32({8, 16}), f32({50, 16}), i64({8})}, {{"chunks", I(0)}}, {}, "at least 1"},
      {"cross_entropy_backward", {f32({}), f32({4, 10}), i64({4})}, {}, {f32({4, 10})}},
      {"cross_entropy_backward", {f32({4}), f32({4, 10}), i64({4})}, {}, {}, "float scalar"},
      {"mse_backward", {f32({}), f32({64, 8}), f32({64, 8})}, {}, {f32({64, 8})}},
      {"mse_backward", {f32({}), f32({64, 8}), f32({64, 7})}, {}, {}, "same type"},
      {"linear_weight_grad", {f32({16, 128, 1024}), f32({16, 128, 256})}, {}, {f32({1024, 256})}},
      {"linear_weight_grad", {f32({16, 128, 1024}), f32({16, 64, 256})}, {}, {}, "share leading dims"},
      {"full", {}, {{"shape", std::vector<std::int64_t>{}}, {"dtype", DType::f32}, {"value", 1.0}}, {f32({})}},
      {"full", {}, {{"shape", std::vector<std::int64_t>{}}, {"dtype", DType::f32}}, {}, "missing attribute 'value'"},
      // Training ops: optimizer.
      {"global_norm", {f32({4, 8}), f32({8})}, {}, {f32({})}},
      {"global_norm", {f32({4}), i64({8})}, {}, {}, "operand 1 must be a floating-point"},
      {"clip_coef", {f32({})}, {{"max_norm", 1.0}}, {f32({})}},
      {"clip_coef", {f32({})}, {{"max_norm", -1.0}}, {}, "max_norm must be positive"},
      {"lr_schedule", {i64({})},
       {{"lr", 3e-4}, {"min_lr", 3e-5}, {"warmup_steps", I(10)}, {"total_steps", I(100)}}, {f32({})}},
      {"lr_schedule", {f32({})},
       {{"lr", 3e-4}, {"min_lr", 3e-5}, {"warmup_steps", I(10)}, {"total_steps", I(100)}}, {}, "integer scalar"},
      {"sgd_step", {f32({4, 8}), f32({4, 8}), f32({}), f32({}), f32({4, 8})},
       {{"momentum", 0.9}, {"weight_decay", 0.0}}, {}},
      {"sgd_step", {f32({4, 8}), f32({4, 8}), f32({}), f32({})}, {{"momentum", 0.9}, {"weight_decay", 0.0}}, {},
       "needs a momentum buffer"},
      {"adamw_step", {f32({8}), f32({8}), f32({8}), f32({8}), f32({}), i64({}), f32({})},
       {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}}, {}},
      {"adamw_step", {f32({8}), f32({8}), f32({7}), f32({8}), f32({}), i64({}), f32({})},
       {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}}, {}, "its moment"},
      // ZeRO's sharded updates (ir/ops_shard.cpp): parts 10 + 30 = 40 elements over 3 ranks,
      // shards of 14; stage 1 reads the full gradients, stage 2 the reduced shard.
      {"adamw_shard_step",
       {f32({10}), f32({3, 10}), f32({10}), f32({3, 10}), f32({14}), f32({14}), f32({}), i64({}), f32({})},
       {{"parts", I(2)}, {"offset", I(14)}, {"shard", I(14)}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
        {"weight_decay", 0.01}},
       {f32({14})}},
      {"adamw_shard_step", {f32({10}), f32({3, 10}), f32({14}), f32({14}), f32({14}), f32({}), i64({}), f32({})},
       {{"parts", I(2)}, {"offset", I(28)}, {"shard", I(14)}, {"grad_shard", true}, {"beta1", 0.9}, {"beta2", 0.999},
        {"eps", 1e-8}, {"weight_decay", 0.01}},
       {f32({14})}},
      {"adamw_shard_step", {f32({10}), f32({3, 10}), f32({14}), f32({13}), f32({14}), f32({}), i64({}), f32({})},
       {{"parts", I(2)}, {"offset", I(0)}, {"shard", I(14)}, {"grad_shard", true}, {"beta1", 0.9}, {"beta2", 0.999},
        {"eps", 1e-8}, {"weight_decay", 0.01}},
       {}, "optimizer state 0 must be f32[14]"},
      {"adamw_shard_step", {f32({10}), f32({14}), f32({14}), f32({14}), f32({}), i64({}), f32({})},
       {{"parts", I(2)}, {"offset", I(0)}, {"shard", I(14)}, {"grad_shard", true}, {"beta1", 0.9}, {"beta2", 0.999},
        {"eps", 1e-8}, {"weight_decay", 0.01}},
       {}, "expected 8 operands"},
      {"sgd_shard_step", {f32({10}), f32({10}), f32({}), f32({}), f32({5})},
       {{"parts", I(1)}, {"offset", I(5)}, {"shard", I(5)}, {"momentum", 0.9}, {"weight_decay", 0.0}},
       {f32({5})}},
      {"sgd_shard_step", {f32({10}), f32({10}), f32({}), f32({})},
       {{"parts", I(1)}, {"offset", I(5)}, {"shard", I(5)}, {"momentum", 0.9}, {"weight_decay", 0.0}},
       {}, "expected 5 operands"},
      {"norm_from_squares", {f32({})}, {}, {f32({})}},
      {"norm_from_squares", {f32({2})}, {}, {}, "must be f32[]"},
      // Collectives (ir/ops_collective.cpp).
      {"reduce_scatter_start", {f32({4, 8}), f32({8})}, {{"world", I(3)}, {"rank", I(1)}, {"seq", I(0)}}, {f32({42})}},
      {"reduce_scatter_start", {f32({4})}, {{"world", I(2)}, {"rank", I(2)}, {"seq", I(0)}}, {}, "rank 2 is not a rank"},
      {"reduce_scatter_wait", {f32({42})}, {{"world", I(3)}, {"rank", I(1)}, {"seq", I(0)}}, {f32({14})}},
      {"reduce_scatter_wait", {f32({41})}, {{"world", I(3)}, {"rank", I(1)}, {"seq", I(0)}}, {},
       "multiple of 3 elements"},
      {"all_gather_params", {f32({4, 8}), f32({8}), f32({14})}, {{"world", I(3)}, {"rank", I(0)}, {"seq", I(0)}}, {}},
      {"all_gather_params", {f32({4, 8}), f32({8}), f32({13})}, {{"world", I(3)}, {"rank", I(0)}, {"seq", I(0)}}, {},
       "the shard must be f32[14]"},
      // ZeRO stage 3: a bucket of f32[4, 8] and f32[8] (40 elements) over 3 ranks, shards of 14.
      {"all_gather_start", {f32({14})}, {{"world", I(3)}, {"rank", I(2)}, {"seq", I(0)}}, {f32({42})}},
      {"all_gather_start", {f32({2, 7})}, {{"world", I(3)}, {"rank", I(2)}, {"seq", I(0)}}, {}, "flat (rank 1)"},
      {"all_gather_wait", {f32({42})},
       {{"world", I(3)}, {"rank", I(0)}, {"seq", I(0)}, {"part_ranks", std::vector<std::int64_t>{2, 1}},
        {"part_shapes", std::vector<std::int64_t>{4, 8, 8}}},
       {f32({4, 8}), f32({8})}},
      {"all_gather_wait", {f32({45})},
       {{"world", I(3)}, {"rank", I(0)}, {"seq", I(0)}, {"part_ranks", std::vector<std::int64_t>{2, 1}},
        {"part_shapes", std::vector<std::int64_t>{4, 8, 8}}},
       {}, "shard into 42"},
      {"adamw_shard_step", {f32({14}), f32({14}), f32({14}), f32({14}), f32({}), i64({}), f32({})},
       {{"parts", I(2)}, {"offset", I(14)}, {"shard", I(14)}, {"grad_shard", true}, {"param_shard", true},
        {"part_numels", std::vector<std::int64_t>{32, 8}}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
        {"weight_decay", 0.01}},
       {}},
      {"adamw_shard_step", {f32({14}), f32({14}), f32({14}), f32({14}), f32({}), i64({}), f32({})},
       {{"parts", I(2)}, {"offset", I(14)}, {"shard", I(14)}, {"grad_shard", true}, {"param_shard", true},
        {"part_numels", std::vector<std::int64_t>{40}}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
        {"weight_decay", 0.01}},
       {}, "one element count per part"},
      {"sgd_shard_step", {f32({14}), f32({13}), f32({}), f32({}), f32({14})},
       {{"parts", I(2)}, {"offset", I(0)}, {"shard", I(14)}, {"grad_shard", true}, {"param_shard", true},
        {"part_numels", std::vector<std::int64_t>{32, 8}}, {"momentum", 0.9}, {"weight_decay", 0.0}},
       {}, "the gradient shard must be f32[14]"},
      // Collectives (ir/ops_collective.cpp).
      {"all_reduce_start", {f32({4, 8}), f32({8})}, {{"world", I(2)}, {"seq", I(0)}}, {f32({40})}},
      {"all_reduce_start", {f32({4}), {DType::f64, {4}}}, {{"world", I(2)}, {"seq", I(0)}}, {}, "first one's dtype"},
      {"all_reduce_start", {f32({4})}, {{"world", I(0)}, {"seq", I(0)}}, {}, "world must be at least 1"},
      {"all_reduce_wait", {f32({40})},
       {{"world", I(2)}, {"seq", I(0)}, {"part_ranks", std::vector<std::int64_t>{2, 1}},
        {"part_shapes", std::vector<std::int64_t>{4, 8, 8}}},
       {f32({4, 8}), f32({8})}},
      {"all_reduce_wait", {f32({41})},
       {{"world", I(2)}, {"seq", I(0)}, {"part_ranks", std::vector<std::int64_t>{2, 1}},
        {"part_shapes", std::vector<std::int64_t>{4, 8, 8}}},
       {}, "the parts hold 40 elements, the bucket 41"},
      {"all_reduce_wait", {f32({40})},
       {{"world", I(2)}, {"seq", I(0)}, {"part_ranks", std::vector<std::int64_t>{2, 2}},
        {"part_shapes", std::vector<std::int64_t>{4, 8, 8}}},
       {}, "does not match part_shapes"},
      {"gather", {f32({4, 3, 5}), i64({4, 3})}, {{"world", I(4)}, {"root", I(0)}, {"seq", I(0)}},
       {f32({16, 3, 5}), i64({16, 3})}},
      {"gather", {f32({4})}, {{"world", I(2)}, {"root", I(2)}, {"seq", I(0)}}, {}, "root 2 is not a rank"},
      {"gather_send", {f32({4, 3}), i64({4})}, {{"world", I(2)}, {"root", I(0)}, {"seq", I(0)}, {"dtype", DType::f64}},
       {{DType::f64, {}}}},
      {"gather_send", {f32({})}, {{"world", I(2)}, {"root", I(0)}, {"seq", I(0)}, {"dtype", DType::f32}}, {},
       "is a scalar"},
      {"scatter", {f32({16, 3})}, {{"world", I(4)}, {"root", I(0)}, {"seq", I(1)}}, {f32({4, 3})}},
      {"scatter", {f32({15, 3})}, {{"world", I(4)}, {"root", I(0)}, {"seq", I(1)}}, {}, "multiple of the world size"},
      {"scatter_recv", {f32({})},
       {{"world", I(4)}, {"root", I(0)}, {"seq", I(1)}, {"shape", std::vector<std::int64_t>{4, 3}},
        {"dtype", DType::f32}},
       {f32({4, 3})}},
      {"scatter_recv", {f32({4})},
       {{"world", I(4)}, {"root", I(0)}, {"seq", I(1)}, {"shape", std::vector<std::int64_t>{4, 3}},
        {"dtype", DType::f32}},
       {}, "must be a scalar"},
      // Convolution: stride 2, padding 1 on 8x8 -> 4x4; two groups.
      {"conv2d", {f32({2, 4, 8, 8}), f32({6, 2, 3, 3}), f32({6})}, conv(2, 1, 1, 2), {f32({2, 6, 4, 4})}},
      {"conv2d", {f32({2, 4, 8, 8}), f32({6, 4, 3, 3})}, conv(1, 1, 2, 1), {f32({2, 6, 6, 6})}},
      {"conv2d", {f32({2, 4, 8, 8}), f32({6, 4, 3, 3})}, conv(1, 1, 1, 2), {}, "input channels"},
      {"conv2d", {f32({2, 4, 8}), f32({6, 4, 3})}, conv(1, 0, 1, 1), {}, "image batch"},
      {"conv2d", {f32({2, 4, 2, 2}), f32({6, 4, 5, 5})}, conv(1, 0, 1, 1), {}, "does not fit"},
      {"conv2d", {f32({2, 4, 8, 8}), f32({6, 4, 3, 3}), f32({5})}, conv(1, 1, 1, 1), {}, "the bias must be"},
      {"conv2d_input_grad", {f32({2, 6, 4, 4}), f32({6, 2, 3, 3})}, withShape(conv(2, 1, 1, 2), "input_shape", {2, 4, 8, 8}),
       {f32({2, 4, 8, 8})}},
      {"conv2d_input_grad", {f32({2, 6, 5, 5}), f32({6, 2, 3, 3})}, withShape(conv(2, 1, 1, 2), "input_shape", {2, 4, 8, 8}),
       {}, "the gradient must be"},
      {"conv2d_weight_grad", {f32({2, 6, 4, 4}), f32({2, 4, 8, 8})},
       withShape(conv(2, 1, 1, 2), "weight_shape", {6, 2, 3, 3}), {f32({6, 2, 3, 3})}},
      {"conv2d_weight_grad", {f32({2, 6, 4, 4}), f32({2, 4, 8, 8})},
       withShape(conv(2, 1, 1, 2), "weight_shape", {6, 2, 3}), {}, "4 extents"},
      // Pooling: 3x3 windows, stride 2, padding 1 on 7x7 -> 4x4; ceil_mode rounds 6x6 / 4 up.
      {"max_pool2d", {f32({2, 3, 7, 7})}, pool(3, 2, 1, false), {f32({2, 3, 4, 4}), i64({2, 3, 4, 4})}},
      {"max_pool2d", {f32({2, 3, 6, 6})}, pool(4, 4, 0, true), {f32({2, 3, 2, 2}), i64({2, 3, 2, 2})}},
      {"max_pool2d", {f32({2, 3, 7, 7})}, pool(2, 2, 2, false), {}, "at most half the kernel"},
      {"max_pool2d_backward", {f32({2, 3, 4, 4}), i64({2, 3, 4, 4})},
       withShape(pool(3, 2, 1, false), "input_shape", {2, 3, 7, 7}), {f32({2, 3, 7, 7})}},
      {"max_pool2d_backward", {f32({2, 3, 4, 4}), i64({2, 3, 3, 3})},
       withShape(pool(3, 2, 1, false), "input_shape", {2, 3, 7, 7}), {}, "the indices must be"},
      {"adaptive_avg_pool2d", {f32({2, 3, 7, 5})}, {{"output_size", std::vector<std::int64_t>{3, 2}}},
       {f32({2, 3, 3, 2})}},
      {"adaptive_avg_pool2d", {f32({2, 3, 7, 5})}, {{"output_size", std::vector<std::int64_t>{3, 0}}}, {},
       "positive sizes"},
      {"adaptive_avg_pool2d_backward", {f32({2, 3, 3, 2})}, {{"input_shape", std::vector<std::int64_t>{2, 3, 7, 5}}},
       {f32({2, 3, 7, 5})}},
      {"adaptive_avg_pool2d_backward", {f32({2, 4, 3, 2})}, {{"input_shape", std::vector<std::int64_t>{2, 3, 7, 5}}},
       {}, "the input's N and C"},
      {"avg_pool2d", {f32({2, 3, 8, 8})}, avgPool(2, 2, 0), {f32({2, 3, 4, 4})}},
      {"avg_pool2d", {i64({2, 3, 8, 8})}, avgPool(2, 2, 0), {}, "floating-point"},
      {"avg_pool2d_backward", {f32({2, 3, 4, 4})}, withShape(avgPool(2, 2, 0), "input_shape", {2, 3, 8, 8}),
       {f32({2, 3, 8, 8})}},
      {"avg_pool2d_backward", {f32({2, 3, 3, 3})}, withShape(avgPool(2, 2, 0), "input_shape", {2, 3, 8, 8}), {},
       "the gradient must be"},
      // Batch normalisation over (N, H, W) per channel.
      {"batch_norm", {f32({4, 3, 5, 5}), f32({3}), f32({3})}, {{"eps", 1e-5}},
       {f32({4, 3, 5, 5}), f32({3}), f32({3}), f32({3})}},
      {"batch_norm", {f32({1, 3, 1, 1}), f32({3}), f32({3})}, {{"eps", 1e-5}}, {}, "more than one value per channel"},
      {"batch_norm", {f32({4, 3, 5, 5}), f32({4}), f32({3})}, {{"eps", 1e-5}}, {}, "the weight must be f32[3]"},
      {"batch_norm_backward", {f32({4, 3, 5, 5}), f32({4, 3, 5, 5}), f32({3}), f32({3}), f32({3})}, {},
       {f32({4, 3, 5, 5}), f32({3}), f32({3})}},
      {"batch_norm_backward", {f32({4, 3, 5, 4}), f32({4, 3, 5, 5}), f32({3}), f32({3}), f32({3})}, {}, {},
       "the gradient must have the input's type"},
      {"running_stats_update", {f32({3}), f32({3}), i64({}), f32({3}), f32({3})}, {{"momentum", 0.1}}, {}},
      {"running_stats_update", {f32({3}), f32({3}), f32({}), f32({3}), f32({3})}, {{"momentum", 0.1}}, {},
       "num_batches_tracked must be i64[]"},
      {"running_stats_update", {f32({3}), f32({3}), i64({}), f32({3}), f32({3})}, {{"momentum", 1.5}}, {},
       "momentum must be in [0, 1]"},
      {"batch_norm_inference", {f32({4, 3, 5, 5}), f32({3}), f32({3}), f32({3}), f32({3})}, {{"eps", 1e-5}},
       {f32({4, 3, 5, 5})}},
      {"batch_norm_inference", {f32({4, 3, 5, 5}), f32({3}), f32({3}), f32({2}), f32({3})}, {{"eps", 1e-5}}, {},
       "the running mean must be"},
  };
  return list;
}

}  // namespace

TEST_CASE("shape inference of every op: accepted and rejected cases") {
  for (const Case& c : cases()) {
    CAPTURE(c.op);
    CAPTURE(c.errorContains);
    const OpInfo* op = findOp(c.op);
    REQUIRE(op != nullptr);
    Expected<std::vector<TensorType>> r = inferResultTypes(*op, c.inputs, c.attrs);
    if (!c.errorContains.empty()) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().message.find(c.errorContains) != std::string::npos);
      CHECK(r.error().message.rfind(c.op + ": ", 0) == 0);  // errors name the op
    } else {
      REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
      CHECK(*r == c.expected);
    }
  }
}

TEST_CASE("every op in the table has accepted and rejected inference cases") {
  std::set<std::string> accepted, rejected;
  for (const Case& c : cases()) (c.errorContains.empty() ? accepted : rejected).insert(c.op);
  for (const OpInfo& op : allOps()) {
    CAPTURE(op.name);
    CHECK(accepted.count(std::string(op.name)));
    CHECK(rejected.count(std::string(op.name)));
    CHECK(static_cast<bool>(op.infer));
    CHECK(static_cast<bool>(op.flops));
    CHECK_FALSE(op.summary.empty());
  }
}

TEST_CASE("op roles: every optimizer update names a sharded form that is a sharded update") {
  int updates = 0;
  for (const OpInfo& op : allOps()) {
    if (op.role != OpRole::OptimizerUpdate) continue;
    CAPTURE(op.name);
    ++updates;
    CHECK(op.stateBegin >= 2);  // parameter and gradient come first
    CHECK(op.stateBegin < op.stateEnd);
    const OpInfo* sharded = findOp(op.shardedForm);
    REQUIRE(sharded);
    CHECK(sharded->role == OpRole::ShardedOptimizerUpdate);
    CHECK(sharded->sideEffects);
  }
  CHECK(updates == 2);  // adamw_step, sgd_step
  REQUIRE(findOp("linear"));
  CHECK(findOp("linear")->role == OpRole::LinearLayer);
}

TEST_CASE("every op carries what the planner and the runtime need") {
  int views = 0, evalIdentities = 0;
  for (const OpInfo& op : allOps()) {
    CAPTURE(op.name);
    CHECK(op.view == (op.viewLayout != ViewLayout::None));
    if (op.view) {
      ++views;
      CHECK(op.stridedReads == StridedReads::Copied);  // a view reads nothing; the default stands
    }
    if (op.issuesCollective) CHECK(op.collective != Collective::None);
    if (op.collective == Collective::AllReduceWait) CHECK(op.view);
    evalIdentities += op.evalIdentity;
  }
  CHECK(views >= 7);
  CHECK(evalIdentities == 1);  // dropout
  CHECK(findOp("matmul")->stridedReads == StridedReads::Matmul);
  CHECK(findOp("softmax")->stridedReads == StridedReads::Copied);
  CHECK(findOp("add")->stridedReads == StridedReads::InPlace);
}
