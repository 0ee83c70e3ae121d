// Shape and dtype inference for every op in the table: one accepted case with its exact
// result types, and rejected cases with the words the error must contain. The last test
// fails when an op is added to the table without cases here.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/attention_tiles.h"
#include "ir/graph.h"
#include "ir/op_table.h"
#include "ir/verifier.h"
#include "onednn/conv.h"

using namespace gradc;
using namespace gradc::ir;

namespace {

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
TensorType i64(Shape s) { return {DType::i64, std::move(s)}; }
TensorType bf16(Shape s) { return {DType::bf16, std::move(s)}; }
std::int64_t I(std::int64_t v) { return v; }

AttrMap conv(std::int64_t stride, std::int64_t padding, std::int64_t dilation, std::int64_t groups) {
  return {{"stride", std::vector<std::int64_t>{stride, stride}},
          {"padding", std::vector<std::int64_t>{padding, padding}},
          {"dilation", std::vector<std::int64_t>{dilation, dilation}},
          {"groups", groups}};
}
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

TEST_CASE("layer_norm_backward's workspace is per intra-op thread: the graph's kernel_threads, a plan parameter") {
  const OpInfo* op = findOp("layer_norm_backward");
  REQUIRE(op);
  const std::vector<TensorType> in{f32({4, 8}), f32({4, 8}), f32({4, 1}), f32({4, 1}), f32({8}), f32({8})};
  const std::vector<TensorType> out{f32({4, 8}), f32({8}), f32({8})};
  // ATen's per-thread partial weight and bias gradient rows: 2 x threads x D floats.
  CHECK(opWorkspaceBytes(*op, in, {}, out, 1) == 2 * 1 * 8 * 4);
  CHECK(opWorkspaceBytes(*op, in, {}, out, 6) == 2 * 6 * 8 * 4);
  CHECK(opWorkspaceBytes(*op, in, {}, out, 0) == 2 * 1 * 8 * 4);  // no thread count below one

  Graph g;
  CHECK(g.kernelThreads() == 1);
  g.setKernelThreads(6);
  CHECK(g.kernelThreads() == 6);
  CHECK(getInt(g.attrs(), "kernel_threads") == 6);
  g.setKernelThreads(0);  // stated, so an artifact's graph always records its count
  CHECK(g.kernelThreads() == 1);
  CHECK(getInt(g.attrs(), "kernel_threads") == 1);
}

TEST_CASE("attention's workspace follows the plan's kernel target: tile slots on the host, CUDA's kernels there") {
  const OpInfo* fwd = findOp("attention");
  const OpInfo* bwd = findOp("attention_backward");
  REQUIRE((fwd && bwd));
  auto f64 = [](Shape s) { return TensorType{DType::f64, std::move(s)}; };
  const AttrMap causal{{"causal", true}, {"scale", 0.25}};
  const KernelSetting cuda{1, KernelTarget::cuda};
  // [2, 4, 64, 16] f32: CUDA's fused kernel runs it. Forward: its output (32 KiB) and its
  // log-sum-exp rows padded to 32 in f32 (2 KiB), and two RNG scalars, each a 512-byte grain.
  const std::vector<TensorType> q{f32({2, 4, 64, 16}), f32({2, 4, 64, 16}), f32({2, 4, 64, 16})};
  const std::vector<TensorType> out{f32({2, 4, 64, 16}), f32({2, 4, 64})};
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, cuda) == 32768 + 2048 + 1024);
  // Backward: the padded log-sum-exp and the row sums (2 x 2 KiB), dq, dk, dv, an f32 dq
  // accumulator and copies of dout and out (6 x 32 KiB).
  const std::vector<TensorType> bq{out[0], q[0], q[1], q[2], out[0], out[1]};
  CHECK(opWorkspaceBytes(*bwd, bq, causal, q, cuda) == 4096 + 6 * 32768);
  // The host's: one tile slot per thread, whatever the target of other plans.
  const std::int64_t slot = AttentionTiling::of(64, 64, 16, 16, false).forwardSlot() * 4;
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, 2) == 2 * slot);
  CHECK(opWorkspaceBytes(*fwd, q, causal, out, KernelSetting{2, KernelTarget::host}) == 2 * slot);

  // f64 is composed of ATen calls a block at a time (all 64 rows here): copies of q, k, v
  // (3 x 64 KiB), the scores [8, 64, 64] (256 KiB), the causal mask (4 KiB), three row
  // statistics (3 x 4 KiB), a copy of q's block and the block's output (2 x 64 KiB).
  const std::vector<TensorType> q64{f64({2, 4, 64, 16}), f64({2, 4, 64, 16}), f64({2, 4, 64, 16})};
  const std::vector<TensorType> out64{f64({2, 4, 64, 16}), f64({2, 4, 64})};
  CHECK(opWorkspaceBytes(*fwd, q64, causal, out64, cuda) == 3 * 65536 + 262144 + 4096 + 3 * 4096 + 2 * 65536);
  // So is dropout (gradc's mask), and shared key/value heads.
  AttrMap dropout = causal;
  dropout["p"] = 0.1;
  dropout["rng"] = std::int64_t{3};
  CHECK(opWorkspaceBytes(*fwd, q, dropout, out, cuda) > opWorkspaceBytes(*fwd, q, causal, out, cuda));
  const std::vector<TensorType> gqa{f32({2, 4, 64, 16}), f32({2, 1, 64, 16}), f32({2, 1, 64, 16})};
  CHECK(opWorkspaceBytes(*fwd, gqa, causal, out, cuda) > opWorkspaceBytes(*fwd, q, causal, out, cuda));

  // A long sequence: the composed kernels' blocks hold at most 32 MiB of scores, never the whole
  // [8, 16384, 16384] (8 GiB in f32).
  const std::vector<TensorType> longQ{f32({2, 4, 16384, 16}), f32({2, 1, 16384, 16}), f32({2, 1, 16384, 16})};
  const std::vector<TensorType> longOut{f32({2, 4, 16384, 16}), f32({2, 4, 16384})};
  const std::int64_t composed = opWorkspaceBytes(*fwd, longQ, causal, longOut, cuda);
  CHECK(composed > (std::int64_t{32} << 20));
  CHECK(composed < (std::int64_t{64} << 20));

  Graph g;
  CHECK(g.kernelTarget() == KernelTarget::host);
  CHECK(g.kernelSetting().target == KernelTarget::host);
  g.setKernelTarget(KernelTarget::cuda);
  CHECK(getString(g.attrs(), "kernel_target") == "cuda");
  CHECK(g.kernelSetting().target == KernelTarget::cuda);
  g.setKernelTarget(KernelTarget::host);
  CHECK(!g.attrs().contains("kernel_target"));
  CHECK(kernelTargetNamed("cuda") == KernelTarget::cuda);
  CHECK(kernelTargetNamed("cpu") == KernelTarget::host);
  CHECK(!kernelTargetNamed("tpu"));
  CHECK(verify(g).ok());
  g.attrs()["kernel_target"] = std::string("tpu");
  CHECK(verify(g).message().find("kernel_target") != std::string::npos);
}

TEST_CASE("convolution workspace: one sample's im2col matrix (f64), oneDNN's answer (f32)") {
  const OpInfo* conv2d = findOp("conv2d");
  REQUIRE(conv2d);
  auto f64 = [](Shape s) { return TensorType{DType::f64, std::move(s)}; };
  const std::vector<TensorType> in{f64({2, 4, 8, 8}), f64({6, 2, 3, 3})};
  const std::vector<TensorType> out{f64({2, 6, 4, 4})};
  // Two samples of 16 output pixels in one GEMM (convChunkSamples): the chunk's column matrix
  // [C/g * kh * kw, 2 * 16] and its [O/g, 2 * 16] result, in doubles.
  CHECK(opWorkspaceBytes(*conv2d, in, conv(2, 1, 1, 2), out, 1) == (2 * 9 + 3) * 2 * 16 * 8);
  CHECK(opFlops(*conv2d, in, conv(2, 1, 1, 2), out) == 2 * 2 * 9 * 2 * 6 * 16);
  // 64x64 outputs (kConvGemmColumns pixels): one sample per GEMM, its column matrix only;
  // pointwise windows none.
  const std::vector<TensorType> big{f64({2, 4, 64, 64}), f64({6, 4, 3, 3})};
  const std::vector<TensorType> bigOut{f64({2, 6, 64, 64})};
  CHECK(opWorkspaceBytes(*conv2d, big, conv(1, 1, 1, 1), bigOut, 1) == 4 * 9 * 4096 * 8);
  const std::vector<TensorType> pin{f64({2, 4, 64, 64}), f64({6, 4, 1, 1})};
  CHECK(opWorkspaceBytes(*conv2d, pin, conv(1, 0, 1, 1), bigOut, 1) == 0);
  // f32: oneDNN's workspace for the pass (blocked copies of a chunk of samples, the weights'
  // copy and the scratchpad) where it has a kernel, at the thread count asked, within the im2col
  // rule's bytes (or one sample's copies); else the same im2col rule.
  const std::vector<TensorType> in32{f32({2, 4, 64, 64}), f32({6, 4, 3, 3})};
  const std::vector<TensorType> out32{f32({2, 6, 64, 64})};
  onednn::ConvShape shape{.n = 2, .c = 4, .h = 64, .w = 64, .o = 6, .kh = 3, .kw = 3, .oh = 64, .ow = 64,
                          .padding = {1, 1}};
  for (int threads : {1, 2}) {
    const std::int64_t im2col = 4 * 9 * 4096 * 4;
    const std::optional<onednn::ConvChunking> chosen =
        onednn::convChunking(shape, onednn::ConvPass::Forward, threads, im2col);
    CHECK(opWorkspaceBytes(*conv2d, in32, conv(1, 1, 1, 1), out32, threads) ==
          (chosen ? chosen->workspaceBytes : im2col));
    if (chosen)
      CHECK(chosen->workspaceBytes <=
            std::max(im2col, *onednn::convWorkspaceBytes(shape, onednn::ConvPass::Forward, threads, 1)));
  }
  CHECK(findOp("batch_norm")->batchStatistics);
  CHECK(findOp("running_stats_update")->sideEffects);
}

TEST_CASE("FLOP and workspace rules") {
  auto flops = [](std::string_view name, std::vector<TensorType> in, AttrMap attrs = {}) {
    const OpInfo& op = *findOp(name);
    auto out = inferResultTypes(op, in, attrs);
    REQUIRE(out.ok());
    return opFlops(op, in, attrs, *out);
  };
  // 2*M*N*K for matrix products, plus one add per output for the bias.
  CHECK(flops("matmul", {f32({2, 8, 16}), f32({2, 16, 4})}) == 2 * 2 * 8 * 4 * 16);
  CHECK(flops("linear", {f32({16, 256}), f32({10, 256}), f32({10})}) == 2 * 16 * 10 * 256 + 16 * 10);
  CHECK(flops("add", {f32({16, 256}), f32({256})}) == 16 * 256);
  CHECK(flops("embedding", {f32({256, 64}), i64({16})}) == 0);
  // cross_entropy materialises the log-probabilities: a workspace as large as the logits (and
  // nll_loss's 0-dim total weight).
  const OpInfo& ce = *findOp("cross_entropy");
  std::vector<TensorType> in{f32({32, 250, 40000}), i64({32, 250})};
  auto out = inferResultTypes(ce, in, {});
  REQUIRE(out.ok());
  CHECK(opWorkspaceBytes(ce, in, {}, *out, 1) == 1'280'000'004);
  CHECK(opBytesAccessed(ce, in, {}, *out, 1) == std::int64_t{1'280'000'004} + 1'280'000'000 + 32 * 250 * 8 + 4);

  // The fused LM-head loss holds one chunk of logits: 40000 classes x ceil(8000 / 16) = 500 rows
  // x 4 bytes, plus per-row columns (3 x 500), the 8000 row loss terms and 1 / N, never the
  // 1.28 GB of logits. Its FLOPs are the unfused forward's and backward's: three matrix products
  // of the logits' size, and 6 elementwise passes.
  const OpInfo& fused = *findOp("linear_cross_entropy");
  const AttrMap sixteen{{"chunks", I(16)}};
  std::vector<TensorType> fin{f32({32, 250, 768}), f32({40000, 768}), i64({32, 250})};
  auto fout = inferResultTypes(fused, fin, sixteen);
  REQUIRE(fout.ok());
  CHECK(opWorkspaceBytes(fused, fin, sixteen, *fout, 1) == (500 * 40000 + 3 * 500 + 8000 + 1) * 4);
  CHECK(linearCrossEntropyChunkRows(8000, 16) == 500);
  CHECK(linearCrossEntropyChunkRows(10, 3) == 4);
  CHECK(linearCrossEntropyChunkRows(10, 50) == 1);
  const std::int64_t logits = std::int64_t{8000} * 40000;
  CHECK(opFlops(fused, fin, sixteen, *fout) == 3 * 2 * logits * 768 + 6 * logits);
  // With an i32 target, the i64 copy of it too.
  std::vector<TensorType> narrow{f32({32, 250, 768}), f32({40000, 768}), {DType::i32, {32, 250}}};
  auto nout = inferResultTypes(fused, narrow, sixteen);
  REQUIRE(nout.ok());
  CHECK(opWorkspaceBytes(fused, narrow, sixteen, *nout, 1) == (500 * 40000 + 3 * 500 + 8000 + 1) * 4 + 8000 * 8);

  // rope's cos and sin tables [S, Dh/2] and the positions and frequencies they come from.
  const OpInfo& rope = *findOp("rope");
  const AttrMap ra{{"base", 1e4}, {"seq_dim", I(1)}, {"inverse", false}};
  std::vector<TensorType> rin{f32({2, 16, 4, 8})};
  auto rout = inferResultTypes(rope, rin, ra);
  REQUIRE(rout.ok());
  CHECK(opWorkspaceBytes(rope, rin, ra, *rout, 1) == (2 * 16 * 4 + 16 + 4) * 4);
}

// What the memory planner and the data-parallel runtime read from the table, for every op: a
// view op must say how its strides derive (else liveness cannot model it), no other op may;
// an op that starts communication must say its role.
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
