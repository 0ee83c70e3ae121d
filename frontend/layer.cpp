// Attribute parsing and IR/parameter helpers of one op layer; see layer.h.
#include "frontend/layer.h"

#include <algorithm>
#include <limits>
#include <cassert>
#include <cctype>

#include "frontend/spec_values.h"
#include "frontend/suggest.h"

namespace gradc::frontend {

namespace {

std::vector<std::string> splitChoices(std::string_view choices) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= choices.size()) {
    size_t bar = choices.find('|', start);
    if (bar == std::string_view::npos) bar = choices.size();
    out.emplace_back(choices.substr(start, bar - start));
    start = bar + 1;
  }
  return out;
}

}  // namespace

std::string Layer::describe() const { return "layer '" + specName_ + "' (" + std::string(op_.name) + ")"; }

bool Layer::parseAttrs() {
  for (const SpecAttr& spec : op_.attrs) {
    if (const YamlNode* value = node_.get(spec.name)) {
      if (!parseOne(spec, *value)) return false;
      continue;
    }
    if (spec.defaultValue.empty()) {
      if (spec.required) {
        error(pos_, std::string(op_.name) + " layer '" + specName_ + "' is missing its '" + std::string(spec.name) +
                        "' attribute",
              std::string(spec.name) + ": " + std::string(spec.doc));
        return false;
      }
      continue;
    }
    // Defaults are written in spec syntax in the op table.
    Parsed v;
    switch (spec.type) {
      case SpecAttrType::Size:
      case SpecAttrType::Int: {
        ExprResult r = evalDimExpr(spec.defaultValue, DimTable{});
        assert(r.ok());
        v = r.value.value_or(0);
        break;
      }
      case SpecAttrType::Float: v = parseFloat(spec.defaultValue).value_or(0.0); break;
      case SpecAttrType::Bool: v = spec.defaultValue == "true"; break;
      case SpecAttrType::Choice: v = std::string(spec.defaultValue); break;
      case SpecAttrType::IntList: v = std::vector<std::int64_t>{}; break;
      case SpecAttrType::LayerRef:
      case SpecAttrType::ValueRef: v = std::string(spec.defaultValue); break;
    }
    attrs_.emplace(std::string(spec.name), AttrValue{std::move(v), pos_});
  }
  return true;
}

bool Layer::parseOne(const SpecAttr& spec, const YamlNode& value) {
  DiagSink& diags = state_.diags;
  std::string what = "attribute '" + std::string(spec.name) + "' of " + std::string(op_.name);
  Parsed v;
  if (spec.nullable && value.kind == YamlNode::Kind::Null) {  // PyTorch's None
    attrs_.emplace(std::string(spec.name), AttrValue{Parsed{std::numeric_limits<double>::quiet_NaN()}, value.pos});
    return true;
  }
  if (spec.pair && value.isSequence()) {  // [height, width]
    if (value.items.size() != 2) {
      error(value.pos, what + " takes one value or a list of two, [height, width]; got a list of " +
                           std::to_string(value.items.size()));
      return false;
    }
    std::vector<std::int64_t> hw;
    for (const YamlNode* item : value.items) {
      std::optional<std::int64_t> r = spec.type == SpecAttrType::Size ? readSize(*item, state_.dims, diags, what)
                                                                       : readInt(*item, state_.dims, diags, what);
      if (!r) return false;
      hw.push_back(*r);
    }
    attrs_.emplace(std::string(spec.name), AttrValue{std::move(hw), value.pos});
    return true;
  }
  switch (spec.type) {
    case SpecAttrType::Size: {
      std::optional<std::int64_t> r = readSize(value, state_.dims, diags, what);
      if (!r) return false;
      v = *r;
      break;
    }
    case SpecAttrType::Int: {
      std::optional<std::int64_t> r = readInt(value, state_.dims, diags, what);
      if (!r) return false;
      v = *r;
      break;
    }
    case SpecAttrType::IntList: {
      auto r = readIntList(value, state_.dims, diags, what, static_cast<size_t>(ir::kMaxRank));
      if (!r) return false;
      v = std::move(*r);
      break;
    }
    case SpecAttrType::Float: {
      std::optional<double> r = readFloat(value, state_.dims, diags, what);
      if (!r) return false;
      v = *r;
      break;
    }
    case SpecAttrType::Bool: {
      std::optional<bool> r = readBool(value, diags, what);
      if (!r) return false;
      v = *r;
      break;
    }
    case SpecAttrType::Choice: {
      std::optional<std::string_view> r = readScalar(value, diags, what);
      if (!r) return false;
      std::vector<std::string> choices = splitChoices(spec.choices);
      if (std::find(choices.begin(), choices.end(), *r) == choices.end()) {
        std::string hint = didYouMean(*r, choices);
        error(value.pos, what + " must be one of " + quotedList(choices) + ", got " + describeNode(value),
              hint);
        return false;
      }
      v = std::string(*r);
      break;
    }
    case SpecAttrType::ValueRef: {  // resolved to a value with the layer's inputs (layers.cpp)
      std::optional<std::string_view> r = readScalar(value, diags, what);
      if (!r) return false;
      v = std::string(*r);
      break;
    }
    case SpecAttrType::LayerRef: {
      std::optional<std::string_view> r = readScalar(value, diags, what);
      if (!r) return false;
      bool wellFormed = !r->empty() && r->front() != '.' && r->back() != '.' && r->find("..") == std::string_view::npos;
      for (char c : *r) wellFormed = wellFormed && (c == '.' || c == '_' || std::isalnum(static_cast<unsigned char>(c)));
      if (!wellFormed) {
        error(value.pos, what + " must name an earlier layer by its dotted spec name (wte, blocks.0.fc), got " +
                             describeNode(value));
        return false;
      }
      v = std::string(*r);
      break;
    }
  }
  attrs_.emplace(std::string(spec.name), AttrValue{std::move(v), value.pos});
  return true;
}

const Layer::AttrValue& Layer::get(std::string_view attr) const {
  auto it = attrs_.find(attr);
  assert(it != attrs_.end() && "attribute not in the op's schema or not given");
  return it->second;
}

bool Layer::has(std::string_view attr) const { return attrs_.find(attr) != attrs_.end(); }
std::int64_t Layer::integer(std::string_view attr) const { return std::get<std::int64_t>(get(attr).value); }
std::vector<std::int64_t> Layer::pair(std::string_view attr) const {
  const Parsed& v = get(attr).value;
  if (const auto* one = std::get_if<std::int64_t>(&v)) return {*one, *one};
  return std::get<std::vector<std::int64_t>>(v);
}
const std::vector<std::int64_t>& Layer::intList(std::string_view attr) const {
  return std::get<std::vector<std::int64_t>>(get(attr).value);
}
double Layer::real(std::string_view attr) const { return std::get<double>(get(attr).value); }
bool Layer::flag(std::string_view attr) const { return std::get<bool>(get(attr).value); }
const std::string& Layer::word(std::string_view attr) const { return std::get<std::string>(get(attr).value); }
SourcePos Layer::attrPos(std::string_view attr) const {
  auto it = attrs_.find(attr);
  return it == attrs_.end() ? pos_ : it->second.pos;
}

std::nullptr_t Layer::error(SourcePos pos, std::string message, std::string hint) {
  state_.diags.error(pos, std::move(message), std::move(hint));
  return nullptr;
}

std::string typeOf(const LayerInput& in) { return "'" + in.name + "' is " + ir::toString(in.value->type()); }

ir::Value* Layer::param(std::string_view suffix, const ir::Shape& shape, ir::AttrMap init,
                        std::optional<ir::DType> dtype) {
  std::string name = specName_ + "." + std::string(suffix);
  if (!ir::checkedNumel(shape))
    return error(pos_, describe() + ": tensor of shape " + ir::shapeToString(shape) +
                           " is too large (more than 2^50 elements) for parameter '" + name + "'");
  auto [it, inserted] = state_.paramOwners.emplace(name, namePos_);
  if (!inserted)
    return error(namePos_,
                 "duplicate parameter '" + name + "': the layer at line " + std::to_string(it->second.line) +
                     " already defines it",
                 "give this layer a different 'name:'");
  return state_.graph.addParam(std::move(name), ir::TensorType{dtype.value_or(state_.dtype), shape}, std::move(init));
}

ir::Value* Layer::tiedParam(std::string_view attr, std::string_view suffix, const ir::Shape* expected) {
  const std::string& owner = word(attr);
  const std::string name = owner + "." + std::string(suffix);
  ir::Value* p = state_.graph.findNamed(name);
  if (!p || p->kind() != ir::ValueKind::Param) {
    std::vector<std::string> candidates;
    const std::string dotSuffix = "." + std::string(suffix);
    for (const auto& q : state_.graph.params())
      if (q->name().size() > dotSuffix.size() && q->name().ends_with(dotSuffix))
        candidates.push_back(q->name().substr(0, q->name().size() - dotSuffix.size()));
    std::string hint = didYouMean(owner, candidates);
    if (hint.empty())
      hint = candidates.empty() ? "no earlier layer has a '" + std::string(suffix) + "' parameter"
                                : "layers with a " + std::string(suffix) + " so far: " + quotedList(candidates);
    return error(attrPos(attr),
                 describe() + " ties '" + name + "', but no earlier layer defines that parameter", std::move(hint));
  }
  if (expected && p->type().shape != *expected)
    return error(attrPos(attr), describe() + " needs a " + std::string(suffix) + " of shape " +
                                    ir::shapeToString(*expected) + ", but the tied '" + name + "' is " +
                                    ir::toString(p->type()));
  return p;
}

ir::Node* Layer::emit(std::string_view irOp, std::vector<ir::Value*> operands, ir::AttrMap attrs,
                      std::string specName) {
  return emitNode(state_, pos_, describe(), op_.name, irOp, operands, std::move(attrs),
                  specName.empty() ? specName_ : std::move(specName));
}

ir::Value* Layer::emit1(std::string_view irOp, std::vector<ir::Value*> operands, ir::AttrMap attrs,
                        std::string specName) {
  ir::Node* node = emit(irOp, std::move(operands), std::move(attrs), std::move(specName));
  return node ? node->result(0) : nullptr;
}

ir::Value* Layer::dropout(ir::Value* x, double p, std::string specName) {
  return emit1("dropout", {x}, {{"p", p}, {"rng", state_.nextRng++}}, std::move(specName));
}

}  // namespace gradc::frontend
