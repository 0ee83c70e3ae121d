// Autodiff: text in, text out, for small hand-written graphs. The rule table against the op
// table and the error cases are in autodiff_errors_test.cpp; whole-model checks (every bundled
// spec) in optimizer_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "tests/ir/test_util.h"

using namespace gradc;

namespace {

std::string runAutodiff(const std::string& text) {
  ir::Graph g = testing::parseOrFail(text);
  passes::Autodiff autodiff;
  Expected<bool> changed = autodiff.run(g);
  if (!changed) FAIL(changed.error().message);
  CHECK(*changed);
  Status verified = ir::verify(g);
  if (!verified) FAIL(verified.message());
  std::string printed = ir::printGraph(g);
  CHECK(ir::printGraph(testing::parseOrFail(printed)) == printed);
  return printed;
}

}  // namespace

TEST_CASE("autodiff: linear, relu, mse") {
  std::string in = R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[8, 3] fwd  # fc
  %1 = relu(%0) : f32[8, 3] fwd  # act
  %2 = mse(%1, %y) : f32[] fwd  # loss
  output loss = %2
)";
  std::string expected = R"(graph g
  input %x : f32[8, 4]
  input %y : f32[8, 3]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[8, 3] fwd  # fc
  %1 = relu(%0) : f32[8, 3] fwd  # act
  %2 = mse(%1, %y) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %1, %y) : f32[8, 3] bwd  # loss
  %5 = relu_backward(%4, %1) : f32[8, 3] bwd  # act
  %6 = linear_weight_grad(%5, %x) : f32[3, 4] bwd  # fc
  %7 = sum_to(%5) {shape = [3]} : f32[3] bwd  # fc
  output loss = %2
  output grad.fc.weight = %6
  output grad.fc.bias = %7
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: a value used twice accumulates its contributions with add") {
  // h feeds both the product and the sum: dh = dmul/dh + dadd/dh.
  std::string in = R"(graph g
  input %x : f32[4]
  input %t : f32[4]
  param %w : f32[4]
  %0 = mul(%x, %w) : f32[4] fwd  # h
  %1 = tanh(%0) : f32[4] fwd  # act
  %2 = mul(%1, %0) : f32[4] fwd  # gate
  %3 = add(%2, %0) : f32[4] fwd  # res
  %4 = mse(%3, %t) : f32[] fwd  # loss
  output loss = %4
)";
  std::string expected = R"(graph g
  input %x : f32[4]
  input %t : f32[4]
  param %w : f32[4]
  %0 = mul(%x, %w) : f32[4] fwd  # h
  %1 = tanh(%0) : f32[4] fwd  # act
  %2 = mul(%1, %0) : f32[4] fwd  # gate
  %3 = add(%2, %0) : f32[4] fwd  # res
  %4 = mse(%3, %t) : f32[] fwd  # loss
  %5 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %6 = mse_backward(%5, %3, %t) : f32[4] bwd  # loss
  %7 = mul(%6, %0) : f32[4] bwd  # gate
  %8 = mul(%6, %1) : f32[4] bwd  # gate
  %9 = add(%6, %8) : f32[4] bwd  # gate
  %10 = tanh_backward(%7, %1) : f32[4] bwd  # act
  %11 = add(%9, %10) : f32[4] bwd  # act
  %12 = mul(%11, %x) : f32[4] bwd  # h
  output loss = %4
  output grad.w = %12
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: broadcasting add and sub reduce with sum_to only where shapes differ") {
  std::string in = R"(graph g
  input %x : f32[2, 3, 4]
  param %b : f32[4]
  param %c : f32[3, 1]
  param %d : f32[2, 3, 4]
  %0 = add(%x, %b) : f32[2, 3, 4] fwd  # bias
  %1 = sub(%0, %c) : f32[2, 3, 4] fwd  # shift
  %2 = mul(%1, %d) : f32[2, 3, 4] fwd  # gate
  %3 = mse(%2, %x) : f32[] fwd  # loss
  output loss = %3
)";
  std::string expected = R"(graph g
  input %x : f32[2, 3, 4]
  param %b : f32[4]
  param %c : f32[3, 1]
  param %d : f32[2, 3, 4]
  %0 = add(%x, %b) : f32[2, 3, 4] fwd  # bias
  %1 = sub(%0, %c) : f32[2, 3, 4] fwd  # shift
  %2 = mul(%1, %d) : f32[2, 3, 4] fwd  # gate
  %3 = mse(%2, %x) : f32[] fwd  # loss
  %4 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %5 = mse_backward(%4, %2, %x) : f32[2, 3, 4] bwd  # loss
  %6 = mul(%5, %d) : f32[2, 3, 4] bwd  # gate
  %7 = mul(%5, %1) : f32[2, 3, 4] bwd  # gate
  %8 = sum_to(%6) {shape = [3, 1]} : f32[3, 1] bwd  # shift
  %9 = scale(%8) {factor = -1.0} : f32[3, 1] bwd  # shift
  %10 = sum_to(%6) {shape = [4]} : f32[4] bwd  # bias
  output loss = %3
  output grad.b = %10
  output grad.c = %9
  output grad.d = %7
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: split with an unused part concatenates zeros for it") {
  std::string in = R"(graph g
  input %t : f32[2, 4]
  param %w : f32[2, 12]
  %0, %1, %2 = split(%w) {dim = 1, sections = 3} : f32[2, 4], f32[2, 4], f32[2, 4] fwd  # qkv
  %3 = mul(%0, %2) : f32[2, 4] fwd  # qv
  %4 = mse(%3, %t) : f32[] fwd  # loss
  output loss = %4
)";
  std::string expected = R"(graph g
  input %t : f32[2, 4]
  param %w : f32[2, 12]
  %0, %1, %2 = split(%w) {dim = 1, sections = 3} : f32[2, 4], f32[2, 4], f32[2, 4] fwd  # qkv
  %3 = mul(%0, %2) : f32[2, 4] fwd  # qv
  %4 = mse(%3, %t) : f32[] fwd  # loss
  %5 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %6 = mse_backward(%5, %3, %t) : f32[2, 4] bwd  # loss
  %7 = mul(%6, %2) : f32[2, 4] bwd  # qv
  %8 = mul(%6, %0) : f32[2, 4] bwd  # qv
  %9 = full() {dtype = f32, shape = [2, 4], value = 0.0} : f32[2, 4] bwd  # qkv
  %10 = concat(%7, %9, %8) {dim = 1} : f32[2, 12] bwd  # qkv
  output loss = %4
  output grad.w = %10
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: layer_norm uses its saved statistics; only y carries a gradient") {
  std::string in = R"(graph g
  input %x : f32[2, 3, 8]
  input %t : f32[2, 3, 8]
  param %ln.weight : f32[8]
  param %ln.bias : f32[8]
  %0, %1, %2 = layer_norm(%x, %ln.weight, %ln.bias) {eps = 1e-05} : f32[2, 3, 8], f32[2, 3, 1], f32[2, 3, 1] fwd  # ln
  %3 = mse(%0, %t) : f32[] fwd  # loss
  output loss = %3
)";
  std::string expected = R"(graph g
  input %x : f32[2, 3, 8]
  input %t : f32[2, 3, 8]
  param %ln.weight : f32[8]
  param %ln.bias : f32[8]
  %0, %1, %2 = layer_norm(%x, %ln.weight, %ln.bias) {eps = 1e-05} : f32[2, 3, 8], f32[2, 3, 1], f32[2, 3, 1] fwd  # ln
  %3 = mse(%0, %t) : f32[] fwd  # loss
  %4 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %5 = mse_backward(%4, %0, %t) : f32[2, 3, 8] bwd  # loss
  %6, %7, %8 = layer_norm_backward(%5, %x, %1, %2, %ln.weight, %ln.bias) : f32[2, 3, 8], f32[8], f32[8] bwd  # ln
  output loss = %3
  output grad.ln.weight = %7
  output grad.ln.bias = %8
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: dropout's backward reuses the forward rng key, so it draws the same mask") {
  std::string in = R"(graph g
  input %x : f32[4, 6]
  input %t : f32[4, 6]
  param %s : f32[6]
  %0 = mul(%x, %s) : f32[4, 6] fwd  # scale
  %1 = dropout(%0) {p = 0.1, rng = 7} : f32[4, 6] fwd  # drop
  %2 = mse(%1, %t) : f32[] fwd  # loss
  output loss = %2
)";
  std::string expected = R"(graph g
  input %x : f32[4, 6]
  input %t : f32[4, 6]
  param %s : f32[6]
  %0 = mul(%x, %s) : f32[4, 6] fwd  # scale
  %1 = dropout(%0) {p = 0.1, rng = 7} : f32[4, 6] fwd  # drop
  %2 = mse(%1, %t) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %1, %t) : f32[4, 6] bwd  # loss
  %5 = dropout(%4) {p = 0.1, rng = 7} : f32[4, 6] bwd  # drop
  %6 = mul(%5, %x) : f32[4, 6] bwd  # scale
  %7 = sum_to(%6) {shape = [6]} : f32[6] bwd  # scale
  output loss = %2
  output grad.s = %7
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: embedding and cross_entropy; no gradient for indices or targets") {
  std::string in = R"(graph g
  input %tokens : i64[2, 5]
  input %targets : i64[2, 5]
  param %wte.weight : f32[16, 8]
  param %head.weight : f32[16, 8]
  %0 = embedding(%wte.weight, %tokens) : f32[2, 5, 8] fwd  # wte
  %1 = gelu(%0) {approximate = "tanh"} : f32[2, 5, 8] fwd  # act
  %2 = linear(%1, %head.weight) : f32[2, 5, 16] fwd  # head
  %3 = cross_entropy(%2, %targets) : f32[] fwd  # loss
  output loss = %3
)";
  std::string expected = R"(graph g
  input %tokens : i64[2, 5]
  input %targets : i64[2, 5]
  param %wte.weight : f32[16, 8]
  param %head.weight : f32[16, 8]
  %0 = embedding(%wte.weight, %tokens) : f32[2, 5, 8] fwd  # wte
  %1 = gelu(%0) {approximate = "tanh"} : f32[2, 5, 8] fwd  # act
  %2 = linear(%1, %head.weight) : f32[2, 5, 16] fwd  # head
  %3 = cross_entropy(%2, %targets) : f32[] fwd  # loss
  %4 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %5 = cross_entropy_backward(%4, %2, %targets) : f32[2, 5, 16] bwd  # loss
  %6 = matmul(%5, %head.weight) : f32[2, 5, 8] bwd  # head
  %7 = linear_weight_grad(%5, %1) : f32[16, 8] bwd  # head
  %8 = gelu_backward(%6, %0) {approximate = "tanh"} : f32[2, 5, 8] bwd  # act
  %9 = embedding_backward(%8, %tokens) {num = 16} : f32[16, 8] bwd  # wte
  output loss = %3
  output grad.wte.weight = %9
  output grad.head.weight = %7
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: a parameter the loss does not depend on gets zeros; dead branches get nothing") {
  std::string in = R"(graph g
  input %x : f32[3, 4]
  input %t : f32[3, 2]
  param %fc.weight : f32[2, 4]
  param %aux.weight : f32[5, 4]
  %0 = linear(%x, %fc.weight) : f32[3, 2] fwd  # fc
  %1 = linear(%x, %aux.weight) : f32[3, 5] fwd  # aux
  %2 = mse(%0, %t) : f32[] fwd  # loss
  output loss = %2
  output aux = %1
)";
  std::string expected = R"(graph g
  input %x : f32[3, 4]
  input %t : f32[3, 2]
  param %fc.weight : f32[2, 4]
  param %aux.weight : f32[5, 4]
  %0 = linear(%x, %fc.weight) : f32[3, 2] fwd  # fc
  %1 = linear(%x, %aux.weight) : f32[3, 5] fwd  # aux
  %2 = mse(%0, %t) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %0, %t) : f32[3, 2] bwd  # loss
  %5 = linear_weight_grad(%4, %x) : f32[2, 4] bwd  # fc
  %6 = full() {dtype = f32, shape = [5, 4], value = 0.0} : f32[5, 4] bwd  # aux.weight
  output loss = %2
  output aux = %1
  output grad.fc.weight = %5
  output grad.aux.weight = %6
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: attention core (reshape, transpose, batched matmul, scale, causal_mask, softmax)") {
  std::string in = R"(graph g
  input %t : f32[2, 4, 8]
  param %qk : f32[2, 4, 16]
  %0, %1 = split(%qk) {dim = 2, sections = 2} : f32[2, 4, 8], f32[2, 4, 8] fwd  # attn
  %2 = reshape(%0) {shape = [2, 4, 2, 4]} : f32[2, 4, 2, 4] fwd  # attn
  %3 = transpose(%2) {dim0 = 1, dim1 = 2} : f32[2, 2, 4, 4] fwd  # attn
  %4 = reshape(%1) {shape = [2, 4, 2, 4]} : f32[2, 4, 2, 4] fwd  # attn
  %5 = transpose(%4) {dim0 = 1, dim1 = 2} : f32[2, 2, 4, 4] fwd  # attn
  %6 = transpose(%5) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] fwd  # attn
  %7 = matmul(%3, %6) : f32[2, 2, 4, 4] fwd  # attn
  %8 = scale(%7) {factor = 0.5} : f32[2, 2, 4, 4] fwd  # attn
  %9 = causal_mask(%8) : f32[2, 2, 4, 4] fwd  # attn
  %10 = softmax(%9) {dim = 3} : f32[2, 2, 4, 4] fwd  # attn
  %11 = matmul(%10, %5) : f32[2, 2, 4, 4] fwd  # attn
  %12 = transpose(%11) {dim0 = 1, dim1 = 2} : f32[2, 4, 2, 4] fwd  # attn
  %13 = reshape(%12) {shape = [2, 4, 8]} : f32[2, 4, 8] fwd  # attn
  %14 = mse(%13, %t) : f32[] fwd  # loss
  output loss = %14
)";
  std::string expected = R"(graph g
  input %t : f32[2, 4, 8]
  param %qk : f32[2, 4, 16]
  %0, %1 = split(%qk) {dim = 2, sections = 2} : f32[2, 4, 8], f32[2, 4, 8] fwd  # attn
  %2 = reshape(%0) {shape = [2, 4, 2, 4]} : f32[2, 4, 2, 4] fwd  # attn
  %3 = transpose(%2) {dim0 = 1, dim1 = 2} : f32[2, 2, 4, 4] fwd  # attn
  %4 = reshape(%1) {shape = [2, 4, 2, 4]} : f32[2, 4, 2, 4] fwd  # attn
  %5 = transpose(%4) {dim0 = 1, dim1 = 2} : f32[2, 2, 4, 4] fwd  # attn
  %6 = transpose(%5) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] fwd  # attn
  %7 = matmul(%3, %6) : f32[2, 2, 4, 4] fwd  # attn
  %8 = scale(%7) {factor = 0.5} : f32[2, 2, 4, 4] fwd  # attn
  %9 = causal_mask(%8) : f32[2, 2, 4, 4] fwd  # attn
  %10 = softmax(%9) {dim = 3} : f32[2, 2, 4, 4] fwd  # attn
  %11 = matmul(%10, %5) : f32[2, 2, 4, 4] fwd  # attn
  %12 = transpose(%11) {dim0 = 1, dim1 = 2} : f32[2, 4, 2, 4] fwd  # attn
  %13 = reshape(%12) {shape = [2, 4, 8]} : f32[2, 4, 8] fwd  # attn
  %14 = mse(%13, %t) : f32[] fwd  # loss
  %15 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %16 = mse_backward(%15, %13, %t) : f32[2, 4, 8] bwd  # loss
  %17 = reshape(%16) {shape = [2, 4, 2, 4]} : f32[2, 4, 2, 4] bwd  # attn
  %18 = transpose(%17) {dim0 = 1, dim1 = 2} : f32[2, 2, 4, 4] bwd  # attn
  %19 = transpose(%5) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] bwd  # attn
  %20 = matmul(%18, %19) : f32[2, 2, 4, 4] bwd  # attn
  %21 = transpose(%10) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] bwd  # attn
  %22 = matmul(%21, %18) : f32[2, 2, 4, 4] bwd  # attn
  %23 = softmax_backward(%20, %10) {dim = 3} : f32[2, 2, 4, 4] bwd  # attn
  %24 = causal_mask_backward(%23) : f32[2, 2, 4, 4] bwd  # attn
  %25 = scale(%24) {factor = 0.5} : f32[2, 2, 4, 4] bwd  # attn
  %26 = transpose(%6) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] bwd  # attn
  %27 = matmul(%25, %26) : f32[2, 2, 4, 4] bwd  # attn
  %28 = transpose(%3) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] bwd  # attn
  %29 = matmul(%28, %25) : f32[2, 2, 4, 4] bwd  # attn
  %30 = transpose(%29) {dim0 = 2, dim1 = 3} : f32[2, 2, 4, 4] bwd  # attn
  %31 = add(%22, %30) : f32[2, 2, 4, 4] bwd  # attn
  %32 = transpose(%31) {dim0 = 1, dim1 = 2} : f32[2, 4, 2, 4] bwd  # attn
  %33 = reshape(%32) {shape = [2, 4, 8]} : f32[2, 4, 8] bwd  # attn
  %34 = transpose(%27) {dim0 = 1, dim1 = 2} : f32[2, 4, 2, 4] bwd  # attn
  %35 = reshape(%34) {shape = [2, 4, 8]} : f32[2, 4, 8] bwd  # attn
  %36 = concat(%35, %33) {dim = 2} : f32[2, 4, 16] bwd  # attn
  output loss = %14
  output grad.qk = %36
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: matmul with broadcast batch dims, and a batched input times a matrix") {
  std::string in = R"(graph g
  input %t : f32[3, 2, 5]
  param %a : f32[3, 2, 4]
  param %b : f32[4, 6]
  param %c : f32[1, 6, 5]
  %0 = matmul(%a, %b) : f32[3, 2, 6] fwd  # ab
  %1 = matmul(%0, %c) : f32[3, 2, 5] fwd  # abc
  %2 = mse(%1, %t) : f32[] fwd  # loss
  output loss = %2
)";
  std::string expected = R"(graph g
  input %t : f32[3, 2, 5]
  param %a : f32[3, 2, 4]
  param %b : f32[4, 6]
  param %c : f32[1, 6, 5]
  %0 = matmul(%a, %b) : f32[3, 2, 6] fwd  # ab
  %1 = matmul(%0, %c) : f32[3, 2, 5] fwd  # abc
  %2 = mse(%1, %t) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %1, %t) : f32[3, 2, 5] bwd  # loss
  %5 = transpose(%c) {dim0 = 1, dim1 = 2} : f32[1, 5, 6] bwd  # abc
  %6 = matmul(%4, %5) : f32[3, 2, 6] bwd  # abc
  %7 = transpose(%0) {dim0 = 1, dim1 = 2} : f32[3, 6, 2] bwd  # abc
  %8 = matmul(%7, %4) : f32[3, 6, 5] bwd  # abc
  %9 = sum_to(%8) {shape = [1, 6, 5]} : f32[1, 6, 5] bwd  # abc
  %10 = transpose(%b) {dim0 = 0, dim1 = 1} : f32[6, 4] bwd  # ab
  %11 = matmul(%6, %10) : f32[3, 2, 4] bwd  # ab
  %12 = linear_weight_grad(%a, %6) : f32[4, 6] bwd  # ab
  output loss = %2
  output grad.a = %11
  output grad.b = %12
  output grad.c = %9
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: linear on a rank-1 input goes through a [1, out] view") {
  std::string in = R"(graph g
  input %t : f32[3]
  param %x : f32[4]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[3] fwd  # fc
  %1 = sigmoid(%0) : f32[3] fwd  # act
  %2 = mse(%1, %t) : f32[] fwd  # loss
  output loss = %2
)";
  std::string expected = R"(graph g
  input %t : f32[3]
  param %x : f32[4]
  param %fc.weight : f32[3, 4]
  param %fc.bias : f32[3]
  %0 = linear(%x, %fc.weight, %fc.bias) : f32[3] fwd  # fc
  %1 = sigmoid(%0) : f32[3] fwd  # act
  %2 = mse(%1, %t) : f32[] fwd  # loss
  %3 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %4 = mse_backward(%3, %1, %t) : f32[3] bwd  # loss
  %5 = sigmoid_backward(%4, %1) : f32[3] bwd  # act
  %6 = reshape(%5) {shape = [1, 3]} : f32[1, 3] bwd  # fc
  %7 = matmul(%6, %fc.weight) : f32[1, 4] bwd  # fc
  %8 = reshape(%7) {shape = [4]} : f32[4] bwd  # fc
  %9 = linear_weight_grad(%5, %x) : f32[3, 4] bwd  # fc
  output loss = %2
  output grad.x = %8
  output grad.fc.weight = %9
  output grad.fc.bias = %5
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: an unrolled recurrence (select, stack, zeros) gives no gradient to constants") {
  std::string in = R"(graph g
  input %x : f32[2, 3, 4]
  input %targets : i64[2, 2]
  param %rnn.weight_ih : f32[4, 4]
  param %rnn.weight_hh : f32[4, 4]
  %0 = linear(%x, %rnn.weight_ih) : f32[2, 3, 4] fwd  # rnn
  %1 = zeros() {dtype = f32, shape = [2, 4]} : f32[2, 4] fwd  # rnn
  %2 = select(%0) {dim = 1, index = 0} : f32[2, 4] fwd  # rnn.step0
  %3 = linear(%1, %rnn.weight_hh) : f32[2, 4] fwd  # rnn.step0
  %4 = add(%2, %3) : f32[2, 4] fwd  # rnn.step0
  %5 = tanh(%4) : f32[2, 4] fwd  # rnn.step0
  %6 = select(%0) {dim = 1, index = 1} : f32[2, 4] fwd  # rnn.step1
  %7 = linear(%5, %rnn.weight_hh) : f32[2, 4] fwd  # rnn.step1
  %8 = add(%6, %7) : f32[2, 4] fwd  # rnn.step1
  %9 = tanh(%8) : f32[2, 4] fwd  # rnn.step1
  %10 = stack(%5, %9) {dim = 1} : f32[2, 2, 4] fwd  # rnn
  %11 = slice(%10) {dim = 2, end = 3, start = 1} : f32[2, 2, 2] fwd  # head
  %12 = log_softmax(%11) {dim = -1} : f32[2, 2, 2] fwd  # head
  %13 = cross_entropy(%12, %targets) : f32[] fwd  # loss
  output loss = %13
)";
  std::string expected = R"(graph g
  input %x : f32[2, 3, 4]
  input %targets : i64[2, 2]
  param %rnn.weight_ih : f32[4, 4]
  param %rnn.weight_hh : f32[4, 4]
  %0 = linear(%x, %rnn.weight_ih) : f32[2, 3, 4] fwd  # rnn
  %1 = zeros() {dtype = f32, shape = [2, 4]} : f32[2, 4] fwd  # rnn
  %2 = select(%0) {dim = 1, index = 0} : f32[2, 4] fwd  # rnn.step0
  %3 = linear(%1, %rnn.weight_hh) : f32[2, 4] fwd  # rnn.step0
  %4 = add(%2, %3) : f32[2, 4] fwd  # rnn.step0
  %5 = tanh(%4) : f32[2, 4] fwd  # rnn.step0
  %6 = select(%0) {dim = 1, index = 1} : f32[2, 4] fwd  # rnn.step1
  %7 = linear(%5, %rnn.weight_hh) : f32[2, 4] fwd  # rnn.step1
  %8 = add(%6, %7) : f32[2, 4] fwd  # rnn.step1
  %9 = tanh(%8) : f32[2, 4] fwd  # rnn.step1
  %10 = stack(%5, %9) {dim = 1} : f32[2, 2, 4] fwd  # rnn
  %11 = slice(%10) {dim = 2, end = 3, start = 1} : f32[2, 2, 2] fwd  # head
  %12 = log_softmax(%11) {dim = -1} : f32[2, 2, 2] fwd  # head
  %13 = cross_entropy(%12, %targets) : f32[] fwd  # loss
  %14 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %15 = cross_entropy_backward(%14, %12, %targets) : f32[2, 2, 2] bwd  # loss
  %16 = log_softmax_backward(%15, %12) {dim = -1} : f32[2, 2, 2] bwd  # head
  %17 = slice_backward(%16) {dim = 2, end = 3, input_shape = [2, 2, 4], start = 1} : f32[2, 2, 4] bwd  # head
  %18 = select(%17) {dim = 1, index = 0} : f32[2, 4] bwd  # rnn
  %19 = select(%17) {dim = 1, index = 1} : f32[2, 4] bwd  # rnn
  %20 = tanh_backward(%19, %9) : f32[2, 4] bwd  # rnn.step1
  %21 = matmul(%20, %rnn.weight_hh) : f32[2, 4] bwd  # rnn.step1
  %22 = linear_weight_grad(%20, %5) : f32[4, 4] bwd  # rnn.step1
  %23 = add(%18, %21) : f32[2, 4] bwd  # rnn.step1
  %24 = select_backward(%20) {dim = 1, index = 1, input_shape = [2, 3, 4]} : f32[2, 3, 4] bwd  # rnn.step1
  %25 = tanh_backward(%23, %5) : f32[2, 4] bwd  # rnn.step0
  %26 = linear_weight_grad(%25, %1) : f32[4, 4] bwd  # rnn.step0
  %27 = add(%22, %26) : f32[4, 4] bwd  # rnn.step0
  %28 = select_backward(%25) {dim = 1, index = 0, input_shape = [2, 3, 4]} : f32[2, 3, 4] bwd  # rnn.step0
  %29 = add(%24, %28) : f32[2, 3, 4] bwd  # rnn.step0
  %30 = linear_weight_grad(%29, %x) : f32[4, 4] bwd  # rnn
  output loss = %13
  output grad.rnn.weight_ih = %30
  output grad.rnn.weight_hh = %27
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: mse against a learned target; concat; stack; gelu without approximate") {
  std::string in = R"(graph g
  input %x : f32[2, 3]
  param %p : f32[2, 3]
  param %q : f32[2, 3]
  %0 = gelu(%p) : f32[2, 3] fwd  # act
  %1 = concat(%0, %x) {dim = -1} : f32[2, 6] fwd  # cat
  %2 = stack(%q, %x) {dim = 0} : f32[2, 2, 3] fwd  # st
  %3 = reshape(%2) {shape = [2, 6]} : f32[2, 6] fwd  # st
  %4 = mse(%1, %3) : f32[] fwd  # loss
  output loss = %4
)";
  std::string expected = R"(graph g
  input %x : f32[2, 3]
  param %p : f32[2, 3]
  param %q : f32[2, 3]
  %0 = gelu(%p) : f32[2, 3] fwd  # act
  %1 = concat(%0, %x) {dim = -1} : f32[2, 6] fwd  # cat
  %2 = stack(%q, %x) {dim = 0} : f32[2, 2, 3] fwd  # st
  %3 = reshape(%2) {shape = [2, 6]} : f32[2, 6] fwd  # st
  %4 = mse(%1, %3) : f32[] fwd  # loss
  %5 = full() {dtype = f32, shape = [], value = 1.0} : f32[] bwd  # loss
  %6 = mse_backward(%5, %1, %3) : f32[2, 6] bwd  # loss
  %7 = scale(%6) {factor = -1.0} : f32[2, 6] bwd  # loss
  %8 = reshape(%7) {shape = [2, 2, 3]} : f32[2, 2, 3] bwd  # st
  %9 = select(%8) {dim = 0, index = 0} : f32[2, 3] bwd  # st
  %10 = slice(%6) {dim = -1, end = 3, start = 0} : f32[2, 3] bwd  # cat
  %11 = gelu_backward(%10, %p) : f32[2, 3] bwd  # act
  output loss = %4
  output grad.p = %11
  output grad.q = %9
)";
  CHECK(runAutodiff(in) == expected);
}

TEST_CASE("autodiff: a graph without parameters is left unchanged; a loss no parameter reaches gives zeros") {
  std::string noParams = "graph g\n  input %x : f32[4]\n  %0 = mse(%x, %x) : f32[] fwd  # loss\n  output loss = %0\n";
  ir::Graph g = testing::parseOrFail(noParams);
  passes::Autodiff autodiff;
  Expected<bool> changed = autodiff.run(g);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
  CHECK(ir::printGraph(g) == noParams);

  std::string dataLoss = R"(graph g
  input %x : f32[4]
  param %w : f32[2]
  %0 = mse(%x, %x) : f32[] fwd  # loss
  output loss = %0
)";
  std::string expected = R"(graph g
  input %x : f32[4]
  param %w : f32[2]
  %0 = mse(%x, %x) : f32[] fwd  # loss
  %1 = full() {dtype = f32, shape = [2], value = 0.0} : f32[2] bwd  # w
  output loss = %0
  output grad.w = %1
)";
  CHECK(runAutodiff(dataLoss) == expected);
}
