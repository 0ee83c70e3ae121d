// The ops of the spec language: for each, its inputs, its attributes (type, default) and the
// function that lowers one layer of it into IR. docs/spec.md documents this same table, and a
// test checks that every op and attribute appears there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace gradc::frontend {

class Layer;

enum class SpecAttrType : std::uint8_t {
  Size,     // integer expression > 0
  Int,      // integer expression, any sign (axes may be negative)
  IntList,  // list of integer expressions
  Float,    // decimal number
  Bool,     // true | false
  Choice,   // one of the words in `choices`
  LayerRef, // the dotted spec name of an earlier layer: wte, blocks.0.fc
  ValueRef, // a value by name, as `input:` names one; it becomes one more of the layer's inputs
};

struct SpecAttr {
  std::string_view name;
  SpecAttrType type;
  std::string_view defaultValue;  // spec text used when absent; empty: see `required`
  bool required = false;          // absent and no default: the lowering decides (e.g. from the input)
  std::string_view choices;       // Choice: "none|tanh"
  std::string_view doc;
  // Size or Int: also a list [h, w] of two, for the two axes of an image (conv and pooling
  // windows, as PyTorch's int-or-tuple); one value means both (Layer::pair reads either).
  bool pair = false;
  // Float: `null` is accepted too, read as NaN (batch_norm's momentum: null, PyTorch's None).
  bool nullable = false;
};

// Lowers one layer; returns its output, or nullptr after reporting an error.
using LowerFn = ir::Value* (*)(Layer& layer);

inline constexpr int kTwoOrMore = -1;  // SpecOp::numInputs of an op taking a list of two or more

struct SpecOp {
  std::string_view name;
  // 0: none (param); 1: `input:` (default '_'); 2: `inputs: [a, b]`; kTwoOrMore: `inputs: [a, b, ...]`
  int numInputs = 1;
  bool indexInput = false;  // the input holds integer indices (embedding); otherwise inputs are float
  std::vector<SpecAttr> attrs;
  LowerFn lower = nullptr;
  std::string_view summary;
};

const SpecOp* findSpecOp(std::string_view name);
std::span<const SpecOp> specOps();
std::vector<std::string> specOpNames();

// Keys every op layer may have besides its attributes.
inline constexpr std::string_view kLayerKeys[] = {"op", "name", "input", "inputs", "output"};

}  // namespace gradc::frontend
