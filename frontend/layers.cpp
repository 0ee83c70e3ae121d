// Lowering of layer lists: each entry is an op layer ({op: ...}) or a repeat block
// ({repeat: N, layers: [...]}). Layers run in sequence; `_` is the previous layer's output,
// `input:`/`inputs:` pick other values by name, `output:` binds a name. A repeat lowers its
// body N times, iteration i under the scope "<name>.<i>", with `x` and `_` bound to the block
// input and its own child scope for names bound inside.
#include "frontend/layers.h"

#include "frontend/layer.h"
#include "frontend/spec_ops.h"
#include "frontend/spec_values.h"
#include "frontend/suggest.h"

namespace gradc::frontend {

namespace {

// Resolves the layer's inputs (explicit or the implicit '_').
bool resolveInputs(LoweringState& state, const SpecOp& op, const YamlNode& item, SourcePos opPos,
                   const Scope& scope, Layer& layer) {
  DiagSink& diags = state.diags;
  std::string opName(op.name);
  if (op.numInputs == 0) {
    for (const char* key : {"input", "inputs"})
      if (const YamlNode* k = item.keyNode(key)) {
        diags.error(k->pos, opName + " takes no input: it makes a value of its own");
        return false;
      }
    return true;
  }
  if (op.numInputs == 1) {
    if (const YamlNode* k = item.keyNode("inputs")) {
      diags.error(k->pos, opName + " takes one input; name it with 'input:'");
      return false;
    }
    const YamlNode* in = item.get("input");
    if (!in) {
      ir::Value* prev = scope.find("_");
      if (!prev) {
        std::vector<std::string> names = scope.visibleNames();
        diags.error(opPos, "the first layer has no previous layer to read from; give it an 'input:'",
                    names.empty() ? std::string("e.g. input: x, naming one of the spec's inputs")
                                  : "e.g. input: " + names.front() + " (defined: " + quotedList(names) + ")");
        return false;
      }
      layer.inputs.push_back({prev, "_", opPos});
      return true;
    }
    ir::Value* v = resolveName(scope, *in, diags, "'input'");
    if (!v) return false;
    layer.inputs.push_back({v, std::string(in->text), in->pos});
    return true;
  }
  const bool twoOrMore = op.numInputs == kTwoOrMore;
  const std::string takes = twoOrMore ? " takes two or more inputs" : " takes two inputs";
  const std::string example = twoOrMore ? "'inputs: [a, b, ...]'" : "'inputs: [a, b]'";
  if (const YamlNode* k = item.keyNode("input")) {
    diags.error(k->pos, opName + takes + "; name them with " + example);
    return false;
  }
  const YamlNode* list = item.get("inputs");
  if (!list) {
    diags.error(opPos, opName + (twoOrMore ? " needs its inputs named: " : " needs its two inputs named: ") + example,
                "'_' is the previous layer's output, e.g. inputs: [x, _]");
    return false;
  }
  const size_t count = list->isSequence() ? list->items.size() : 0;
  if (!list->isSequence() || (twoOrMore ? count < 2 : count != 2)) {
    diags.error(list->pos, opName + (twoOrMore ? takes : " takes exactly two inputs") + ", as in " + example + "; got " +
                               describeNode(*list) + (list->isSequence() ? " of " + std::to_string(count) : std::string()));
    return false;
  }
  for (const YamlNode* in : list->items) {
    ir::Value* v = resolveName(scope, *in, diags, "an entry of 'inputs'");
    if (!v) return false;
    layer.inputs.push_back({v, std::string(in->text), in->pos});
  }
  return true;
}

// Integer indices for embedding, floating point for everything else.
bool checkInputDtypes(LoweringState& state, const SpecOp& op, Layer& layer) {
  for (const LayerInput& in : layer.inputs) {
    const ir::TensorType& t = in.value->type();
    if (op.indexInput && !ir::isInteger(t.dtype)) {
      state.diags.error(in.pos,
                        layer.describe() + " needs integer indices (i64 or i32), but '" + in.name + "' is " +
                            ir::toString(t),
                        "declare the input with 'dtype: i64'");
      return false;
    }
    if (!op.indexInput && !ir::isFloating(t.dtype)) {
      state.diags.error(in.pos,
                        layer.describe() + " needs floating-point values, but '" + in.name + "' is " + ir::toString(t),
                        ir::isInteger(t.dtype) ? "integer indices go through an 'embedding' layer first" : "");
      return false;
    }
  }
  return true;
}

// `output: NAME`: binds the value under a new or existing name.
bool bindOutput(LoweringState& state, const YamlNode& item, Scope& scope, ir::Value* value) {
  const YamlNode* out = item.get("output");
  if (!out) return true;
  std::optional<std::string_view> name = readIdentifier(*out, state.diags, "'output'");
  if (!name) return false;
  if (*name == "_") {
    state.diags.error(out->pos, "'_' always names the previous layer's output and cannot be bound",
                      "choose another name, e.g. output: h");
    return false;
  }
  scope.bind(*name, value);
  return true;
}

bool countLayer(LoweringState& state, SourcePos pos) {
  if (++state.layerInstances <= state.options.maxGraphNodes) return true;
  state.diags.error(pos, "the model has more than " + std::to_string(state.options.maxGraphNodes) +
                             " layers once repeats are expanded",
                    "reduce a repeat count");
  return false;
}

bool lowerOpLayer(LoweringState& state, const YamlNode& item, size_t index, Scope& scope, const std::string& prefix) {
  DiagSink& diags = state.diags;
  const YamlNode& opNode = *item.get("op");
  std::optional<std::string_view> opName = readScalar(opNode, diags, "'op'");
  if (!opName) return false;
  const SpecOp* op = findSpecOp(*opName);
  if (!op) {
    std::vector<std::string> names = specOpNames();
    std::string hint = didYouMean(*opName, names);
    diags.error(opNode.pos, "unknown op '" + clip(*opName) + "'",
                hint.empty() ? "the ops are " + quotedList(names) : hint);
    return false;
  }

  std::vector<std::string> allowed(std::begin(kLayerKeys), std::end(kLayerKeys));
  std::vector<std::string> attrNames;
  for (const SpecAttr& a : op->attrs) attrNames.emplace_back(a.name);
  allowed.insert(allowed.end(), attrNames.begin(), attrNames.end());
  std::string fallback = attrNames.empty()
                             ? std::string(op->name) + " takes no attributes"
                             : std::string(op->name) + " takes " + quotedList(attrNames) +
                                   " besides 'op', 'name', 'input' and 'output'";
  if (!checkKeys(item, allowed, diags, std::string(op->name), "attribute", fallback)) return false;

  SourcePos namePos = opNode.pos;
  std::string localName = std::string(op->name) + "_" + std::to_string(index);
  if (const YamlNode* n = item.get("name")) {
    std::optional<std::string_view> name = readIdentifier(*n, diags, "a layer 'name'");
    if (!name) return false;
    localName = std::string(*name);
    namePos = n->pos;
  }
  if (!countLayer(state, opNode.pos)) return false;

  Layer layer(state, *op, item, prefix + localName, opNode.pos, namePos);
  if (!resolveInputs(state, *op, item, opNode.pos, scope, layer)) return false;
  // Attributes that name values (attention's kv_input) join the inputs, in table order.
  for (const SpecAttr& a : op->attrs) {
    if (a.type != SpecAttrType::ValueRef) continue;
    const YamlNode* ref = item.get(a.name);
    if (!ref) continue;
    ir::Value* v = resolveName(scope, *ref, diags, "'" + std::string(a.name) + "'");
    if (!v) return false;
    layer.inputs.push_back({v, std::string(ref->text), ref->pos});
  }
  if (!checkInputDtypes(state, *op, layer)) return false;
  if (!layer.parseAttrs()) return false;
  ir::Value* out = op->lower(layer);
  if (!out) return false;

  state.outputs.push_back({out, opNode.pos, layer.specName(), op->name});
  scope.bind("_", out);
  return bindOutput(state, item, scope, out);
}

// Op layers in `list` once repeats are expanded (saturating at INT64_MAX), or nullopt when a
// nested repeat count does not evaluate (lowering reports that error in its place).
std::optional<std::int64_t> expandedLayers(const YamlNode& list, const DimTable& dims, int depth) {
  if (depth > kMaxRepeatNesting) return std::nullopt;
  std::int64_t total = 0;
  for (const YamlNode* item : list.items) {
    std::int64_t n = 1;
    const YamlNode* count = item->isMap() ? item->get("repeat") : nullptr;
    if (count) {
      const YamlNode* body = item->get("layers");
      if (!count->isScalar() || !body || !body->isSequence()) return std::nullopt;
      ExprResult c = evalDimExpr(count->text, dims);
      std::optional<std::int64_t> inner = expandedLayers(*body, dims, depth + 1);
      if (!c.ok() || *c.value <= 0 || !inner) return std::nullopt;
      if (__builtin_mul_overflow(*c.value, *inner, &n)) n = INT64_MAX;
    }
    if (__builtin_add_overflow(total, n, &total)) total = INT64_MAX;
  }
  return total;
}

bool lowerRepeat(LoweringState& state, const YamlNode& item, size_t index, Scope& scope, const std::string& prefix,
                 int depth) {
  DiagSink& diags = state.diags;
  if (!checkKeys(item, {"repeat", "name", "layers", "input", "output", "first"}, diags, "a repeat block", "key",
                 "a repeat block has 'repeat', 'layers' and optionally 'name', 'first', 'input' and 'output'"))
    return false;
  const YamlNode* repeatKey = item.keyNode("repeat");
  if (depth >= kMaxRepeatNesting) {
    diags.error(repeatKey->pos, "repeat blocks nest deeper than " + std::to_string(kMaxRepeatNesting) + " levels");
    return false;
  }
  const YamlNode& countNode = *item.get("repeat");
  std::optional<std::int64_t> count = readInt(countNode, state.dims, diags, "the repeat count");
  if (!count) return false;
  if (*count <= 0) {
    std::string shown(countNode.text);
    bool literal = shown == std::to_string(*count);
    diags.error(countNode.pos, "the repeat count must be a positive integer, but " +
                                   (literal ? std::string("it is ") : "'" + shown + "' is ") + std::to_string(*count));
    return false;
  }

  // The number of the first iteration's scope (default 0): a block continuing another block's
  // numbering (ResNet's layer2.1 after a differently shaped layer2.0).
  std::int64_t first = 0;
  if (const YamlNode* f = item.get("first")) {
    std::optional<std::int64_t> v = readInt(*f, state.dims, diags, "'first'");
    if (!v) return false;
    if (*v < 0) {
      diags.error(f->pos, "'first' of a repeat block must be >= 0, got " + std::to_string(*v));
      return false;
    }
    first = *v;
  }

  std::string name = "repeat_" + std::to_string(index);
  if (const YamlNode* n = item.get("name")) {
    std::optional<std::string_view> v = readIdentifier(*n, diags, "a repeat 'name'");
    if (!v) return false;
    name = std::string(*v);
  }
  const YamlNode* body = item.get("layers");
  if (!body) {
    diags.error(repeatKey->pos, "this repeat block has no 'layers'", "e.g. layers: [{op: linear, out: 64}]");
    return false;
  }
  if (!body->isSequence() || body->items.empty()) {
    diags.error(body->pos, "'layers' of a repeat must be a non-empty list of layers, got " + describeNode(*body));
    return false;
  }

  // Refuse a repeat that cannot fit before lowering any of it.
  std::optional<std::int64_t> perIteration = expandedLayers(*body, state.dims, depth + 1);
  std::int64_t total = 0;
  std::int64_t room = state.options.maxGraphNodes - state.layerInstances;
  if (perIteration && (__builtin_mul_overflow(*count, *perIteration, &total) || total > room)) {
    diags.error(countNode.pos,
                "this repeat expands to more than the limit of " + std::to_string(state.options.maxGraphNodes) +
                    " layers (" + std::to_string(*count) + " iterations of " + std::to_string(*perIteration) +
                    " layers)",
                "reduce the repeat count");
    return false;
  }

  ir::Value* current = nullptr;
  if (const YamlNode* in = item.get("input")) {
    current = resolveName(scope, *in, diags, "'input'");
    if (!current) return false;
  } else if (!(current = scope.find("_"))) {
    diags.error(repeatKey->pos, "the first layer has no previous layer to read from; give this repeat an 'input:'");
    return false;
  }

  for (std::int64_t i = 0; i < *count; ++i) {
    Scope iteration(&scope);
    iteration.bind("x", current);
    iteration.bind("_", current);
    if (!lowerLayers(state, *body, iteration, prefix + name + "." + std::to_string(first + i) + ".", depth + 1))
      return false;
    current = iteration.find("_");
  }
  scope.bind("_", current);
  return bindOutput(state, item, scope, current);
}

}  // namespace

bool lowerLayers(LoweringState& state, const YamlNode& list, Scope& scope, const std::string& prefix, int depth) {
  DiagSink& diags = state.diags;
  for (size_t i = 0; i < list.items.size(); ++i) {
    const YamlNode& item = *list.items[i];
    if (!item.isMap()) {
      diags.error(item.pos, "a layer is a mapping such as {op: linear, out: 64}, got " + describeNode(item));
      return false;
    }
    bool isRepeat = item.get("repeat") != nullptr;
    bool isOp = item.get("op") != nullptr;
    if (isRepeat && isOp) {
      diags.error(item.keyNode("repeat")->pos, "a layer has either 'op' or 'repeat', not both");
      return false;
    }
    bool ok = isRepeat ? lowerRepeat(state, item, i, scope, prefix, depth)
              : isOp   ? lowerOpLayer(state, item, i, scope, prefix)
                       : (diags.error(item.pos, "this layer has no 'op'", "every layer names its op, e.g. {op: relu}"),
                        false);
    if (!ok) return false;
  }
  return true;
}

}  // namespace gradc::frontend
