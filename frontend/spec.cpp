// compileSpec: the spec's top level. Reads the YAML (bounded), then, in this order: model
// name, dtype, dims (with --set overrides), seed, inputs, layers, loss; finally warns about
// layer results and inputs that nothing uses. The first error stops compilation.
#include "frontend/spec.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "frontend/diag_sink.h"
#include "frontend/layers.h"
#include "frontend/loss.h"
#include "frontend/lowering_state.h"
#include "frontend/scope.h"
#include "frontend/spec_values.h"
#include "frontend/suggest.h"
#include "frontend/yaml_tree.h"

namespace gradc::frontend {

namespace {

const std::vector<std::string> kTopKeys = {"model", "dims", "dtype", "seed", "inputs", "layers", "loss"};

bool isModelNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

Diagnostic setError(std::string message, std::string hint = {}) {
  return Diagnostic{Severity::Error, "--set", 0, 0, std::move(message), std::move(hint)};
}

class SpecCompiler {
 public:
  SpecCompiler(std::string_view source, const SpecOptions& options, DiagSink& diags)
      : source_(source), options_(options), diags_(diags) {}

  // Every dim's value after run(), in spec order.
  const std::vector<std::pair<std::string, std::int64_t>>& dimValues() const { return dimValues_; }

  std::optional<ir::Graph> run() {
    if (static_cast<std::int64_t>(source_.size()) > options_.maxSourceBytes) {
      diags_.error({}, "the spec is " + std::to_string(source_.size()) + " bytes, more than the limit of " +
                           std::to_string(options_.maxSourceBytes));
      return std::nullopt;
    }
    YamlParseResult parsed = parseYaml(source_, options_.maxYamlNodes);
    if (!parsed.document) {
      diags_.error(parsed.error.pos, parsed.error.message, parsed.error.hint);
      return std::nullopt;
    }
    const YamlNode& root = *parsed.document->root();
    if (!root.isMap()) {
      diags_.error(root.pos, "a spec is a YAML mapping with 'model', 'inputs', 'layers' and 'loss', but this "
                             "document is " + describeNode(root));
      return std::nullopt;
    }
    if (!checkKeys(root, kTopKeys, diags_, "a spec", "key", "the keys of a spec are " + quotedList(kTopKeys)))
      return std::nullopt;

    std::optional<std::string> name = modelName(root);
    if (!name || !readDtype(root) || !readDims(root)) return std::nullopt;
    std::optional<std::int64_t> seed = readSeed(root);
    if (!seed) return std::nullopt;

    ir::Graph graph(*name);
    graph.attrs()["model"] = *name;
    graph.attrs()["seed"] = *seed;
    LoweringState state{graph, diags_, dims_, options_, dtype_};
    Scope scope;
    if (!readInputs(root, graph, scope)) return std::nullopt;

    const YamlNode* layers = root.get("layers");
    if (!layers) {
      diags_.error(root.pos, "the spec has no 'layers'", "layers: [{op: linear, input: x, out: 10}, ...]");
      return std::nullopt;
    }
    if (!layers->isSequence() || layers->items.empty()) {
      diags_.error(layers->pos, "'layers' must be a non-empty list of layers, got " + describeNode(*layers));
      return std::nullopt;
    }
    if (!lowerLayers(state, *layers, scope, "", 0)) return std::nullopt;

    const YamlNode* loss = root.get("loss");
    if (!loss) {
      diags_.error(root.pos, "the spec has no 'loss'", "loss: {op: cross_entropy, target: targets}");
      return std::nullopt;
    }
    if (!lowerLoss(state, *loss, scope)) return std::nullopt;

    warnUnused(state);
    return graph;
  }

 private:
  std::optional<std::string> modelName(const YamlNode& root) {
    const YamlNode* node = root.get("model");
    if (!node) {
      diags_.error(root.pos, "the spec has no 'model' name", "add a line such as 'model: gpt-mini'");
      return std::nullopt;
    }
    std::optional<std::string_view> text = readScalar(*node, diags_, "'model'");
    if (!text) return std::nullopt;
    if (text->empty() || text->size() > 200 || !std::all_of(text->begin(), text->end(), isModelNameChar)) {
      diags_.error(node->pos, "the model name must be letters, digits, '_', '-' or '.', got " + describeNode(*node));
      return std::nullopt;
    }
    return std::string(*text);
  }

  bool readDtype(const YamlNode& root) {
    const YamlNode* node = root.get("dtype");
    if (!node) return true;
    std::optional<std::string_view> text = readScalar(*node, diags_, "'dtype'");
    if (!text) return false;
    const std::vector<std::string> floats = {"f32", "f64", "f16", "bf16"};
    if (std::find(floats.begin(), floats.end(), *text) == floats.end()) {
      std::string hint = didYouMean(*text, floats);
      diags_.error(node->pos, "the model dtype must be one of " + quotedList(floats) + ", got " + describeNode(*node),
                   hint);
      return false;
    }
    dtype_ = *ir::parseDType(*text);
    return true;
  }

  // Evaluates the dims in order; an override replaces a dim's expression before evaluation,
  // so later dims that use it follow.
  bool readDims(const YamlNode& root) {
    const YamlNode* dims = root.get("dims");
    if (dims && !dims->isMap() && !dims->isNull()) {
      diags_.error(dims->pos, "'dims' must be a mapping of names to sizes, such as {batch: 16}, got " +
                                  describeNode(*dims));
      return false;
    }
    std::vector<std::string> names;
    if (dims)
      for (const auto& [key, value] : dims->entries) {
        std::optional<std::string_view> name = readIdentifier(*key, diags_, "a dim name");
        if (!name) return false;
        names.emplace_back(*name);
      }
    for (const auto& [name, expr] : options_.overrides) {
      if (name == "seed" || std::find(names.begin(), names.end(), name) != names.end()) continue;
      std::vector<std::string> candidates = names;
      candidates.emplace_back("seed");
      std::string hint = didYouMean(name, candidates);
      diags_.add(setError("--set " + name + ": the spec has no dim '" + name + "'",
                          hint.empty() ? "the dims are " + quotedList(names) + " (and 'seed')" : hint));
      return false;
    }
    if (!dims) return true;
    for (size_t i = 0; i < dims->entries.size(); ++i) {
      const YamlNode& value = *dims->entries[i].second;
      const std::string& name = names[i];
      std::optional<std::int64_t> v;
      if (const std::string* expr = overrideFor(name)) {
        ExprResult r = evalDimExpr(*expr, dims_);
        if (!r.ok()) {
          diags_.add(setError("--set " + name + "=" + *expr + ": " + r.error.message, r.error.hint));
          return false;
        }
        v = r.value;
      } else {
        if (!value.isScalar()) {
          diags_.error(value.pos, "dim '" + name + "' must be an integer expression, got " + describeNode(value));
          return false;
        }
        ExprResult r = evalDimExpr(value.text, dims_);
        if (!r.ok()) {
          ExprError error = r.error;
          auto later = std::find(names.begin() + static_cast<std::ptrdiff_t>(i), names.end(), error.undefinedName);
          if (!error.undefinedName.empty() && later != names.end())
            error.hint = "dims are evaluated in order, and '" + error.undefinedName + "' is defined below, at line " +
                         std::to_string(dims->entries[static_cast<size_t>(later - names.begin())].first->pos.line);
          reportExprError(value, error, diags_);
          return false;
        }
        v = r.value;
      }
      dims_.set(name, *v);
      dimValues_.emplace_back(name, *v);
    }
    return true;
  }

  const std::string* overrideFor(std::string_view name) const {
    const std::string* found = nullptr;
    for (const auto& [n, expr] : options_.overrides)
      if (n == name) found = &expr;  // the last one wins
    return found;
  }

  std::optional<std::int64_t> readSeed(const YamlNode& root) {
    std::optional<std::int64_t> seed = 0;
    const YamlNode* node = root.get("seed");
    if (const std::string* expr = dims_.find("seed") ? nullptr : overrideFor("seed")) {
      ExprResult r = evalDimExpr(*expr, dims_);
      if (!r.ok()) {
        diags_.add(setError("--set seed=" + *expr + ": " + r.error.message, r.error.hint));
        return std::nullopt;
      }
      seed = r.value;
      if (*seed < 0) {
        diags_.add(setError("--set seed=" + *expr + ": the seed must not be negative"));
        return std::nullopt;
      }
      return seed;
    }
    if (!node) return seed;
    seed = readInt(*node, dims_, diags_, "'seed'");
    if (seed && *seed < 0) {
      diags_.error(node->pos, "the seed must not be negative, got " + std::to_string(*seed));
      return std::nullopt;
    }
    return seed;
  }

  bool readInputs(const YamlNode& root, ir::Graph& graph, Scope& scope) {
    const YamlNode* inputs = root.get("inputs");
    if (!inputs) {
      diags_.error(root.pos, "the spec has no 'inputs'", "inputs: {x: {shape: [batch, 784], dtype: f32}}");
      return false;
    }
    if (!inputs->isMap() || inputs->entries.empty()) {
      diags_.error(inputs->pos, "'inputs' must be a mapping of names to {shape, dtype}, got " + describeNode(*inputs));
      return false;
    }
    for (const auto& [key, value] : inputs->entries) {
      std::optional<std::string_view> name = readIdentifier(*key, diags_, "an input name");
      if (!name) return false;
      if (*name == "_") {
        diags_.error(key->pos, "'_' names the previous layer's output and cannot be an input");
        return false;
      }
      std::string owner = "input '" + std::string(*name) + "'";
      if (!value->isMap()) {
        diags_.error(value->pos, owner + " must be a mapping such as {shape: [batch, seq], dtype: i64}, got " +
                                     describeNode(*value));
        return false;
      }
      if (!checkKeys(*value, {"shape", "dtype", "batched"}, diags_, owner, "key",
                     "an input has 'shape', 'dtype' and 'batched'"))
        return false;
      const YamlNode* shapeNode = value->get("shape");
      if (!shapeNode) {
        diags_.error(key->pos, owner + " has no 'shape'", "e.g. shape: [batch, seq]");
        return false;
      }
      auto shape = readIntList(*shapeNode, dims_, diags_, "the shape of " + owner, static_cast<size_t>(ir::kMaxRank));
      if (!shape) return false;
      for (size_t i = 0; i < shape->size(); ++i)
        if ((*shape)[i] <= 0) {
          const YamlNode& entry = *shapeNode->items[i];
          diags_.error(entry.pos, "extent " + std::to_string(i) + " of " + owner + " must be positive, but '" +
                                      std::string(entry.text) + "' is " + std::to_string((*shape)[i]));
          return false;
        }
      if (!ir::checkedNumel(*shape)) {
        diags_.error(shapeNode->pos, owner + ": tensor of shape " + ir::shapeToString(*shape) +
                                         " is too large (more than 2^50 elements)");
        return false;
      }
      ir::DType dtype = dtype_;
      if (const YamlNode* d = value->get("dtype")) {
        std::optional<std::string_view> text = readScalar(*d, diags_, "the dtype of " + owner);
        if (!text) return false;
        std::optional<ir::DType> parsed = ir::parseDType(*text);
        if (!parsed) {
          const std::vector<std::string> all = {"f32", "f64", "f16", "bf16", "i64", "i32", "bool"};
          std::string hint = didYouMean(*text, all);
          diags_.error(d->pos, "unknown dtype " + describeNode(*d) + " for " + owner,
                       hint.empty() ? "the dtypes are " + quotedList(all) : hint);
          return false;
        }
        dtype = *parsed;
      }
      ir::Value* input = graph.addInput(std::string(*name), ir::TensorType{dtype, *shape});
      if (const YamlNode* b = value->get("batched")) {
        // Not batched: the same tensor for every example (a fixed mask, a bias table), never
        // split by micro-batching or data parallelism.
        std::optional<bool> batched = readBool(*b, diags_, "'batched' of " + owner);
        if (!batched) return false;
        if (!*batched) input->attrs()["batched"] = false;
      }
      scope.bind(*name, input);
      inputPositions_.push_back(key->pos);
    }
    return true;
  }

  // A layer whose result nothing reads is almost always a wiring mistake (e.g. a residual
  // `add` that names the wrong value); a layer inside a repeat is reported once.
  void warnUnused(LoweringState& state) {
    constexpr size_t kMaxWarnings = 50;
    std::set<std::pair<int, int>> warned;
    size_t skipped = 0;
    for (const LayerOutput& out : state.outputs) {
      if (out.value->hasUses()) continue;
      if (!warned.insert({out.pos.line, out.pos.column}).second) continue;
      if (warned.size() > kMaxWarnings) {
        ++skipped;
        continue;
      }
      diags_.warning(out.pos,
                     "the output of layer '" + out.specName + "' (" + std::string(out.op) + ") is never used",
                     "no later layer reads it (as '_' or by an 'output:' name) and the loss does not use it");
    }
    if (skipped)
      diags_.warning({}, std::to_string(skipped) + " more layers have outputs that are never used");
    const auto& inputs = state.graph.inputs();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i]->hasUses())
        diags_.warning(inputPositions_[i], "input '" + inputs[i]->name() + "' is never used");
  }

  std::string_view source_;
  const SpecOptions& options_;
  DiagSink& diags_;
  DimTable dims_;
  std::vector<std::pair<std::string, std::int64_t>> dimValues_;  // in spec order
  ir::DType dtype_ = ir::DType::f32;
  std::vector<SourcePos> inputPositions_;
};

}  // namespace

SpecResult compileSpec(std::string_view sourceText, std::string_view fileName, const SpecOptions& options) {
  DiagSink diags{std::string(fileName)};
  SpecResult result;
  try {
    SpecCompiler compiler(sourceText, options, diags);
    std::optional<ir::Graph> graph = compiler.run();
    if (!diags.failed()) result.graph = std::move(graph);
    result.dims = compiler.dimValues();
  } catch (const std::exception& e) {
    // Nothing above is expected to throw; out-of-memory is the one realistic case.
    diags.error({}, std::string("could not compile the spec: ") + e.what());
  }
  result.diagnostics = diags.take();
  return result;
}

SpecResult compileSpecFile(const std::string& path, const SpecOptions& options) {
  // A FIFO or a device would block or never end: a spec is a regular file.
  std::error_code ec;
  if (const auto type = std::filesystem::status(path, ec).type(); !ec && type != std::filesystem::file_type::regular) {
    SpecResult result;
    result.diagnostics.push_back(Diagnostic{Severity::Error, path, 0, 0, "cannot read the spec: not a regular file", ""});
    return result;
  }
  std::ifstream file(path, std::ios::binary);
  std::string text;
  if (file) {
    // Read at most one byte past the limit: enough to know the file is too large.
    const std::int64_t limit = options.maxSourceBytes + 1;
    char buffer[1 << 16];
    while (file && static_cast<std::int64_t>(text.size()) < limit) {
      std::int64_t want = std::min<std::int64_t>(sizeof buffer, limit - static_cast<std::int64_t>(text.size()));
      file.read(buffer, want);
      text.append(buffer, static_cast<size_t>(file.gcount()));
    }
  }
  if (!file && !file.eof()) {
    SpecResult result;
    result.diagnostics.push_back(Diagnostic{Severity::Error, path, 0, 0, "cannot read the spec file", ""});
    return result;
  }
  return compileSpec(text, path, options);
}

}  // namespace gradc::frontend
