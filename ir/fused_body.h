// The body of a `fused` node (ir/ops_fused.cpp): a straight-line program of elementwise ops over
// one iteration space, created by passes/fuse.h and compiled to one kernel by codegen/.
//
// A body reads the node's operands ($0, $1, ...) and its own earlier steps (%0, %1, ...), and
// returns some of its steps as the node's results, in order. Every step's result has the
// iteration space's shape (the shape of every result of the node); operands may be smaller and
// broadcast to it (numpy rules), and every operand and step has one floating dtype. Intermediates
// that are not returned never exist in memory: the kernel keeps them in registers.
//
// Text (the node's `body` attribute, so the IR text shows and round-trips it):
//
//   %0 = add($0, $1) @blocks.0.res; %1 = gelu(%0) {approximate = tanh} @blocks.0.act; return %1, %0
//
// Steps are separated by "; " and numbered in order; `{...}` are the step op's attributes
// (strings bare: they are identifiers); `@name` is the spec layer the step came from (shown by
// `gradc compile --emit llvm`). The printer writes exactly what the parser reads.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_table.h"
#include "ir/status.h"
#include "ir/tensor_type.h"

namespace gradc::ir {

class Node;

// A step's operand: one of the node's operands ($index) or an earlier step's result (%index).
struct FusedOperand {
  bool isInput = false;
  int index = 0;
  friend bool operator==(const FusedOperand&, const FusedOperand&) = default;
};

struct FusedStep {
  const OpInfo* op = nullptr;
  std::vector<FusedOperand> operands;
  AttrMap attrs;
  std::string specName;
};

struct FusedBody {
  std::vector<FusedStep> steps;
  std::vector<int> outputs;  // step indices, in the node's result order
};

// Ops a body may hold: the op table's elementwise ops (dropout included: its stream is a kernel
// argument), not `fused` itself.
bool isFusableOp(const OpInfo& op);

std::string printFusedBody(const FusedBody& body);
// Errors name the position in the text and what was expected there.
Expected<FusedBody> parseFusedBody(std::string_view text);
// parseFusedBody, remembered per text: passes ask a node's body for its types and costs often,
// and the same body repeats in every layer of a model.
Expected<std::shared_ptr<const FusedBody>> cachedFusedBody(std::string_view text);

// The result type of every step, given the node's operand types: each op's own rule on its
// operands' types; an Error when a rule refuses, a step reads what does not exist, a step's
// result is not the iteration space (the first step's shape) or an operand does not broadcast.
Expected<std::vector<TensorType>> inferFusedSteps(const FusedBody& body, std::span<const TensorType> inputs);

// The random streams a fused kernel is given at run time: (rng, rng_offset) of each random step,
// in step order (the attributes of dropout, ir/ops.cpp; rng_offset 0 when absent).
std::vector<std::int64_t> fusedRandomStreams(const FusedBody& body);

// A name for the kernel of a fused node: the same for every node with the same body (spec names
// and random streams aside) and operand and result types (every layer of a model shares one),
// different otherwise.
// "gradc_fused_" + 16 hex digits of a 64-bit FNV-1a hash of the body, the types and the
// operands' strides (the node's `strides` attribute; empty when every operand is contiguous).
std::string fusedKernelName(std::string_view body, std::span<const TensorType> inputs,
                            std::span<const TensorType> results, std::span<const std::int64_t> strides = {});

// A fused node reads each operand through static strides in elements, one per dimension of
// the operand: its optional IntList attribute `strides` holds them, operand after operand
// (passes/fuse.cpp writes it when some operand is a strided view); without it every operand is
// contiguous. Per operand, its strides; an Error when the attribute does not match the operands
// (a wrong length, a negative stride).
Expected<std::vector<std::vector<std::int64_t>>> fusedOperandStrides(const AttrMap& attrs,
                                                                      std::span<const TensorType> inputs);

// The generated kernel a node runs, or "" when it runs an ATen-backed kernel: a fused node's
// (fusedKernelName), and the one-pass AdamW update of adamw_step {fused = true}
// ("gradc_adamw_f32" or "gradc_adamw_f64", by the parameter's dtype).
std::string generatedKernelName(const Node& node);

}  // namespace gradc::ir
