// One op layer being lowered: its attributes, parsed and checked against the op's schema; its
// resolved inputs; its full dotted name; and helpers that create its parameters and IR nodes
// with errors positioned in the spec.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "frontend/lowering_state.h"
#include "frontend/spec_ops.h"
#include "frontend/yaml_tree.h"

namespace gradc::frontend {

struct LayerInput {
  ir::Value* value;
  std::string name;  // as written: "_", "x", "tokens"
  SourcePos pos;     // where it is named (the op name when implicit)
};

// "'x' is f32[4, 8]": an input as messages name it.
std::string typeOf(const LayerInput& in);

class Layer {
 public:
  Layer(LoweringState& state, const SpecOp& op, const YamlNode& node, std::string specName, SourcePos pos,
        SourcePos namePos)
      : state_(state), op_(op), node_(node), specName_(std::move(specName)), pos_(pos), namePos_(namePos) {}

  // Parses every attribute of the op (given or defaulted). Keys are checked by the caller.
  // Returns false after reporting the first problem.
  bool parseAttrs();

  const SpecOp& op() const { return op_; }
  const std::string& specName() const { return specName_; }
  SourcePos pos() const { return pos_; }
  // "layer 'blocks.0.attn' (attention)", for messages.
  std::string describe() const;
  ir::DType dtype() const { return state_.dtype; }
  LoweringState& state() { return state_; }

  std::vector<LayerInput> inputs;
  ir::Value* input(size_t i = 0) const { return inputs.at(i).value; }

  // Parsed attribute values (the schema guarantees the type).
  bool has(std::string_view attr) const;  // given in the spec or defaulted
  std::int64_t integer(std::string_view attr) const;
  // A `pair` attribute (SpecAttr::pair) as {height, width}: one value given means both.
  std::vector<std::int64_t> pair(std::string_view attr) const;
  const std::vector<std::int64_t>& intList(std::string_view attr) const;
  double real(std::string_view attr) const;
  bool flag(std::string_view attr) const;
  const std::string& word(std::string_view attr) const;  // Choice and LayerRef
  // Where the attribute's value is written; the op name when it was defaulted.
  SourcePos attrPos(std::string_view attr) const;

  // Reports an error in this layer; always returns nullptr (for `return layer.error(...)`).
  std::nullptr_t error(SourcePos pos, std::string message, std::string hint = {});

  // Adds the parameter "<specName>.<suffix>"; nullptr after an error (too large, duplicate).
  // `dtype`: the model's dtype unless given (batch_norm's i64 num_batches_tracked).
  ir::Value* param(std::string_view suffix, const ir::Shape& shape, ir::AttrMap init,
                   std::optional<ir::DType> dtype = std::nullopt);
  // The parameter "<word(attr)>.<suffix>" an earlier layer made, shared by this one (weight
  // tying); nullptr after an error (no such parameter, or not of shape `expected` when given).
  ir::Value* tiedParam(std::string_view attr, std::string_view suffix, const ir::Shape* expected = nullptr);
  // Creates an IR node in this layer (spec name: this layer's unless given).
  ir::Node* emit(std::string_view irOp, std::vector<ir::Value*> operands, ir::AttrMap attrs = {},
                 std::string specName = {});
  // emit() for single-result ops: the result, or nullptr.
  ir::Value* emit1(std::string_view irOp, std::vector<ir::Value*> operands, ir::AttrMap attrs = {},
                   std::string specName = {});
  // A dropout node with the next RNG id.
  ir::Value* dropout(ir::Value* x, double p, std::string specName = {});

 private:
  using Parsed = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>>;
  struct AttrValue {
    Parsed value;
    SourcePos pos;
  };
  const AttrValue& get(std::string_view attr) const;
  bool parseOne(const SpecAttr& spec, const YamlNode& value);

  LoweringState& state_;
  const SpecOp& op_;
  const YamlNode& node_;
  std::string specName_;
  SourcePos pos_;
  SourcePos namePos_;
  std::map<std::string, AttrValue, std::less<>> attrs_;
};

}  // namespace gradc::frontend
