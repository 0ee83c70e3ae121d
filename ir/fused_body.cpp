#include "ir/fused_body.h"

#include "ir/graph.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace gradc::ir {

bool isFusableOp(const OpInfo& op) { return op.elementwise && op.name != "fused"; }

namespace {

bool isSpecNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '/' || c == ':';
}
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string operandText(const FusedOperand& o) { return (o.isInput ? "$" : "%") + std::to_string(o.index); }

std::string attrText(const Attribute& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  return toString(value);
}

}  // namespace

std::string printFusedBody(const FusedBody& body) {
  std::string out;
  for (size_t i = 0; i < body.steps.size(); ++i) {
    const FusedStep& step = body.steps[i];
    out += "%" + std::to_string(i) + " = " + std::string(step.op->name) + "(";
    for (size_t k = 0; k < step.operands.size(); ++k) out += (k ? ", " : "") + operandText(step.operands[k]);
    out += ")";
    if (!step.attrs.empty()) {
      out += " {";
      bool first = true;
      for (const auto& [key, value] : step.attrs) {
        out += (first ? "" : ", ") + key + " = " + attrText(value);
        first = false;
      }
      out += "}";
    }
    bool nameable = !step.specName.empty();
    for (char c : step.specName) nameable = nameable && isSpecNameChar(c);
    if (nameable) out += " @" + step.specName;
    out += "; ";
  }
  out += "return";
  for (size_t k = 0; k < body.outputs.size(); ++k) out += (k ? ", %" : " %") + std::to_string(body.outputs[k]);
  return out;
}

namespace {

class BodyParser {
 public:
  explicit BodyParser(std::string_view text) : text_(text) {}

  Expected<FusedBody> parse() {
    FusedBody body;
    while (true) {
      skipSpace();
      if (word("return")) break;
      Expected<FusedStep> step = parseStep(static_cast<int>(body.steps.size()));
      if (!step) return step.error();
      body.steps.push_back(std::move(*step));
      skipSpace();
      if (!eat(';')) return error("expected ';' after a step");
    }
    do {
      skipSpace();
      Expected<FusedOperand> ref = parseOperand();
      if (!ref) return ref.error();
      if (ref->isInput || ref->index >= static_cast<int>(body.steps.size()))
        return error("return names %" + std::to_string(ref->index) + ", which is not a step");
      body.outputs.push_back(ref->index);
      skipSpace();
    } while (eat(','));
    if (pos_ != text_.size()) return error("unexpected text after the return");
    if (body.steps.empty()) return error("a body needs at least one step");
    return body;
  }

 private:
  Expected<FusedStep> parseStep(int number) {
    Expected<FusedOperand> self = parseOperand();
    if (!self) return self.error();
    if (self->isInput || self->index != number) return error("expected step %" + std::to_string(number));
    skipSpace();
    if (!eat('=')) return error("expected '='");
    skipSpace();
    std::string opName = ident();
    FusedStep step;
    step.op = findOp(opName);
    if (!step.op) return error("unknown op '" + opName + "'");
    if (!isFusableOp(*step.op)) return error("op '" + opName + "' cannot be fused");
    if (!eat('(')) return error("expected '('");
    skipSpace();
    if (!eat(')')) {
      do {
        skipSpace();
        Expected<FusedOperand> o = parseOperand();
        if (!o) return o.error();
        if (!o->isInput && o->index >= number) return error("%" + std::to_string(o->index) + " is not an earlier step");
        step.operands.push_back(*o);
        skipSpace();
      } while (eat(','));
      if (!eat(')')) return error("expected ')'");
    }
    skipSpace();
    if (eat('{')) {
      do {
        skipSpace();
        std::string key = ident();
        const AttrSpec* spec = findAttrSpec(*step.op, key);
        if (!spec) return error(opName + " has no attribute '" + key + "'");
        skipSpace();
        if (!eat('=')) return error("expected '=' after " + key);
        skipSpace();
        Expected<Attribute> value = parseValue(spec->kind);
        if (!value) return value.error();
        step.attrs.emplace(key, std::move(*value));
        skipSpace();
      } while (eat(','));
      if (!eat('}')) return error("expected '}'");
      skipSpace();
    }
    if (eat('@')) {
      size_t start = pos_;
      while (pos_ < text_.size() && isSpecNameChar(text_[pos_])) ++pos_;
      step.specName = std::string(text_.substr(start, pos_ - start));
    }
    return step;
  }

  Expected<Attribute> parseValue(AttrKind kind) {
    size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_])) && text_[pos_] != ',' &&
           text_[pos_] != '}')
      ++pos_;
    std::string token(text_.substr(start, pos_ - start));
    if (token.empty()) return error("expected a value");
    switch (kind) {
      case AttrKind::String:
        for (char c : token)
          if (!isIdentChar(c)) return error("string values in a body are identifiers, got '" + token + "'");
        return Attribute{token};
      case AttrKind::Bool:
        if (token == "true" || token == "false") return Attribute{token == "true"};
        return error("expected true or false, got '" + token + "'");
      case AttrKind::Int: {
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(token.c_str(), &end, 10);
        if (errno || *end) return error("expected an integer, got '" + token + "'");
        return Attribute{static_cast<std::int64_t>(v)};
      }
      case AttrKind::Float: {
        errno = 0;
        char* end = nullptr;
        double v = std::strtod(token.c_str(), &end);
        if (errno == EINVAL || *end) return error("expected a number, got '" + token + "'");
        return Attribute{v};
      }
      default: return error("attributes of this kind cannot appear in a body");
    }
  }

  Expected<FusedOperand> parseOperand() {
    FusedOperand o;
    if (eat('$')) o.isInput = true;
    else if (!eat('%')) return error("expected $N or %N");
    size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) && pos_ - start < 9) ++pos_;
    if (pos_ == start) return error("expected a number");
    o.index = std::atoi(std::string(text_.substr(start, pos_ - start)).c_str());
    return o;
  }

  std::string ident() {
    size_t start = pos_;
    while (pos_ < text_.size() && isIdentChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  bool word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    if (pos_ + w.size() < text_.size() && isIdentChar(text_[pos_ + w.size()])) return false;
    pos_ += w.size();
    return true;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skipSpace() {
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
  }
  Error error(const std::string& message) const {
    return Error{"fused body, column " + std::to_string(pos_ + 1) + ": " + message};
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Expected<FusedBody> parseFusedBody(std::string_view text) { return BodyParser(text).parse(); }

Expected<std::shared_ptr<const FusedBody>> cachedFusedBody(std::string_view text) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const FusedBody>, std::less<>> cache;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(text); it != cache.end()) return it->second;
  }
  Expected<FusedBody> parsed = parseFusedBody(text);
  if (!parsed) return parsed.error();
  auto body = std::make_shared<const FusedBody>(std::move(*parsed));
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() > 4096) cache.clear();  // bounded: a long-lived process sees many graphs
  cache.emplace(std::string(text), body);
  return body;
}

Expected<std::vector<TensorType>> inferFusedSteps(const FusedBody& body, std::span<const TensorType> inputs) {
  std::vector<TensorType> types;
  types.reserve(body.steps.size());
  for (size_t i = 0; i < body.steps.size(); ++i) {
    const FusedStep& step = body.steps[i];
    std::vector<TensorType> operandTypes;
    for (const FusedOperand& o : step.operands) {
      if (o.isInput && o.index >= static_cast<int>(inputs.size()))
        return Error{"step %" + std::to_string(i) + " reads $" + std::to_string(o.index) + " but the node has " +
                     std::to_string(inputs.size()) + " operand(s)"};
      operandTypes.push_back(o.isInput ? inputs[o.index] : types[o.index]);
    }
    Expected<std::vector<TensorType>> r = inferResultTypes(*step.op, operandTypes, step.attrs);
    if (!r) return r.error().withContext("step %" + std::to_string(i) + ": ");
    if (r->size() != 1) return Error{"step %" + std::to_string(i) + " has more than one result"};
    TensorType t = (*r)[0];
    if (!isFloating(t.dtype) || t.dtype == DType::bf16 || t.dtype == DType::f16)
      return Error{"step %" + std::to_string(i) + " computes " + toString(t) + "; fused bodies compute f32 or f64"};
    if (!types.empty() && t != types[0])
      return Error{"step %" + std::to_string(i) + " computes " + toString(t) + ", not the iteration space " +
                   toString(types[0])};
    for (const TensorType& in : operandTypes)
      if (in.dtype != t.dtype) return Error{"step %" + std::to_string(i) + " mixes " + toString(in) + " and " + toString(t)};
    types.push_back(std::move(t));
  }
  return types;
}

std::vector<std::int64_t> fusedRandomStreams(const FusedBody& body) {
  std::vector<std::int64_t> streams;
  for (const FusedStep& s : body.steps)
    if (s.op->random) {
      streams.push_back(getInt(s.attrs, "rng").value_or(0));
      streams.push_back(getInt(s.attrs, "rng_offset").value_or(0));
    }
  return streams;
}

std::string fusedKernelName(std::string_view body, std::span<const TensorType> inputs,
                            std::span<const TensorType> results, std::span<const std::int64_t> strides) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  // The spec names and random streams do not change the code (the streams are kernel arguments):
  // layers with the same arithmetic share a kernel.
  Expected<std::shared_ptr<const FusedBody>> parsed = cachedFusedBody(body);
  if (parsed) {
    FusedBody unnamed = **parsed;
    for (FusedStep& s : unnamed.steps) {
      s.specName.clear();
      if (s.op->random) {
        s.attrs.erase("rng");
        s.attrs.erase("rng_offset");
      }
    }
    mix(printFusedBody(unnamed));
  } else {
    mix(body);
  }
  for (const TensorType& t : inputs) mix(toString(t));
  mix("->");
  for (const TensorType& t : results) mix(toString(t));
  if (!strides.empty()) {
    mix("strides");
    for (std::int64_t s : strides) mix(std::to_string(s));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("gradc_fused_") + hex;
}

Expected<std::vector<std::vector<std::int64_t>>> fusedOperandStrides(const AttrMap& attrs,
                                                                      std::span<const TensorType> inputs) {
  const std::optional<std::vector<std::int64_t>> flat = getIntList(attrs, "strides");
  size_t dims = 0;
  for (const TensorType& t : inputs) dims += t.shape.size();
  if (flat && flat->size() != dims)
    return Error{"strides lists " + std::to_string(flat->size()) + " values, but the operands have " +
                 std::to_string(dims) + " dimensions"};
  std::vector<std::vector<std::int64_t>> strides;
  size_t at = 0;
  for (const TensorType& t : inputs) {
    std::vector<std::int64_t> own(t.shape.size());
    std::int64_t contiguous = 1;
    for (size_t d = own.size(); d-- > 0;) {
      own[d] = flat ? (*flat)[at + d] : contiguous;
      contiguous *= t.shape[d];
      if (own[d] < 0) return Error{"strides must not be negative, got " + std::to_string(own[d])};
    }
    at += own.size();
    strides.push_back(std::move(own));
  }
  return strides;
}

std::string generatedKernelName(const Node& node) {
  if (node.opName() == "fused")
    return fusedKernelName(getString(node.attrs(), "body").value_or(""), node.operandTypes(), node.resultTypes(),
                           getIntList(node.attrs(), "strides").value_or(std::vector<std::int64_t>{}));
  if (node.opName() == "adamw_step" && getBool(node.attrs(), "fused").value_or(false))
    return std::string("gradc_adamw_") + std::string(dtypeName(node.operand(0)->type().dtype));
  return {};
}

}  // namespace gradc::ir
