// A hand-written recursive-descent parser over one line at a time: every declaration of the
// IR text format is a single line, which keeps error recovery and positions trivial.
#include "ir/parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/verifier.h"

namespace gradc::ir {
namespace {

struct ParseError {
  int column;
  std::string message;
};

class LineParser {
 public:
  explicit LineParser(std::string_view line) : s_(line) {}

  [[noreturn]] void fail(std::string message) const { throw ParseError{static_cast<int>(pos_) + 1, std::move(message)}; }
  [[noreturn]] void failAt(size_t pos, std::string message) const {
    throw ParseError{static_cast<int>(pos) + 1, std::move(message)};
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool atEnd() {
    skipSpace();
    return pos_ >= s_.size();
  }
  char peek() {
    skipSpace();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  size_t pos() const { return pos_; }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, std::string_view what) {
    if (!consume(c)) fail("expected '" + std::string(1, c) + "' " + std::string(what));
  }

  static bool isIdentChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  }

  std::string_view identifier(std::string_view what) {
    skipSpace();
    size_t start = pos_;
    while (pos_ < s_.size() && isIdentChar(s_[pos_])) ++pos_;
    if (start == pos_) fail("expected " + std::string(what));
    return s_.substr(start, pos_ - start);
  }

  std::string quoted() {
    skipSpace();
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'x': {
          if (pos_ + 2 > s_.size()) fail("bad \\x escape");
          int v = 0;
          auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 2, v, 16);
          if (ec != std::errc() || p != s_.data() + pos_ + 2) fail("bad \\x escape");
          out += static_cast<char>(v);
          pos_ += 2;
          break;
        }
        default: fail("unknown escape '\\" + std::string(1, e) + "'");
      }
    }
    return out;
  }

  // A name after '%' or in an output declaration: bare or quoted.
  std::string name(std::string_view what) {
    if (peek() == '"') return quoted();
    return std::string(identifier(what));
  }

  // "%name" or "%N"; returns the text after '%' and whether it was quoted.
  std::pair<std::string, bool> valueRef() {
    if (!consume('%')) fail("expected a value (%name)");
    bool quotedName = pos_ < s_.size() && s_[pos_] == '"';
    if (quotedName) return {quoted(), true};
    size_t start = pos_;
    while (pos_ < s_.size() && isIdentChar(s_[pos_])) ++pos_;
    if (start == pos_) fail("expected a value name after '%'");
    return {std::string(s_.substr(start, pos_ - start)), false};
  }

  std::int64_t integer() {
    skipSpace();
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
    if (ec == std::errc::result_out_of_range) fail("integer out of range");
    if (ec != std::errc()) fail("expected an integer");
    pos_ = static_cast<size_t>(p - s_.data());
    return v;
  }

  TensorType tensorType() {
    skipSpace();
    size_t start = pos_;
    std::string_view dt = identifier("a tensor type such as f32[2, 3]");
    std::optional<DType> dtype = parseDType(dt);
    if (!dtype) failAt(start, "unknown dtype '" + std::string(dt) + "' (expected f32, f64, f16, bf16, i64, i32 or bool)");
    TensorType t{*dtype, {}};
    expect('[', "after the dtype");
    if (!consume(']')) {
      do {
        size_t at = pos_;
        std::int64_t d = integer();
        if (d <= 0) failAt(at, "extents must be positive, got " + std::to_string(d));
        t.shape.push_back(d);
        if (t.shape.size() > static_cast<size_t>(kMaxRank)) failAt(at, "rank exceeds " + std::to_string(kMaxRank));
      } while (consume(','));
      expect(']', "to close the shape");
    }
    if (!checkedNumel(t.shape)) failAt(start, "tensor type " + toString(t) + " is too large");
    return t;
  }

  Attribute attributeValue() {
    char c = peek();
    if (c == '"') return quoted();
    if (c == '[') {
      ++pos_;
      std::vector<std::int64_t> list;
      if (!consume(']')) {
        do list.push_back(integer());
        while (consume(','));
        expect(']', "to close the list");
      }
      return list;
    }
    size_t start = pos_;
    if (c == '-' || (c >= '0' && c <= '9')) {
      size_t end = pos_ + 1;
      while (end < s_.size() && (isIdentChar(s_[end]) || s_[end] == '+')) ++end;
      std::string_view tok = s_.substr(pos_, end - pos_);
      if (tok == "-inf") {
        pos_ = end;
        return -std::numeric_limits<double>::infinity();
      }
      if (tok.find_first_of(".eE") != std::string_view::npos) {
        double v = 0;
        auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
        if (ec != std::errc() || p != tok.data() + tok.size()) failAt(start, "malformed number '" + std::string(tok) + "'");
        pos_ = end;
        return v;
      }
      std::int64_t v = integer();
      if (pos_ != end) failAt(start, "malformed number '" + std::string(tok) + "'");
      return v;
    }
    std::string_view word = identifier("an attribute value");
    if (word == "true") return true;
    if (word == "false") return false;
    if (word == "inf") return std::numeric_limits<double>::infinity();
    if (word == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (std::optional<DType> d = parseDType(word)) return *d;
    failAt(start, "unexpected attribute value '" + std::string(word) + "'");
  }

  AttrMap attributes() {
    AttrMap attrs;
    if (!consume('{')) return attrs;
    if (consume('}')) return attrs;
    do {
      size_t at = (skipSpace(), pos_);
      std::string key(identifier("an attribute name"));
      expect('=', "after the attribute name");
      Attribute value = attributeValue();
      if (!attrs.emplace(key, std::move(value)).second) failAt(at, "attribute '" + key + "' is given twice");
    } while (consume(','));
    expect('}', "to close the attributes");
    return attrs;
  }

  std::string_view rest() {
    skipSpace();
    std::string_view r = s_.substr(pos_);
    pos_ = s_.size();
    while (!r.empty() && (r.back() == ' ' || r.back() == '\t' || r.back() == '\r')) r.remove_suffix(1);
    return r;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

class GraphParser {
 public:
  explicit GraphParser(std::string_view fileName) : fileName_(fileName) {}

  Expected<Graph> parse(std::string_view text) {
    int lineNo = 0;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      ++lineNo;
      try {
        parseLine(line);
      } catch (const ParseError& e) {
        return Error{std::string(fileName_) + ":" + std::to_string(lineNo) + ":" + std::to_string(e.column) +
                     ": error: " + e.message};
      }
      start = end + 1;
    }
    if (!sawHeader_) return Error{std::string(fileName_) + ":1:1: error: expected 'graph NAME' (empty input)"};
    if (Status s = verify(graph_); !s) return s.error().withContext(std::string(fileName_) + ": error: invalid graph: ");
    return std::move(graph_);
  }

 private:
  void parseLine(std::string_view text) {
    LineParser p(text);
    if (p.atEnd() || p.peek() == '#') return;
    size_t keywordAt = p.pos();
    if (p.peek() == '%') return parseNode(p);
    std::string_view keyword = p.identifier("a declaration (graph, input, param, output or %result = op(...))");
    if (keyword == "graph") {
      if (sawHeader_) p.failAt(keywordAt, "a second 'graph' header");
      sawHeader_ = true;
      graph_.setName(p.name("the graph name"));
      graph_.attrs() = p.attributes();
      if (!p.atEnd()) p.fail("unexpected text after the graph header");
      return;
    }
    if (!sawHeader_) p.failAt(keywordAt, "expected 'graph NAME' first");
    if (keyword == "input" || keyword == "param") {
      size_t at = (p.skipSpace(), p.pos());
      auto [name, quotedName] = p.valueRef();
      if (!quotedName && isNumber(name)) p.failAt(at, "inputs and parameters need a name, not a number (%" + name + ")");
      if (values_.count(name)) p.failAt(at, "'%" + name + "' is already defined");
      p.expect(':', "before the type");
      TensorType type = p.tensorType();
      Value* v = nullptr;
      if (keyword == "input") {
        v = graph_.addInput(name, type);
        v->attrs() = p.attributes();
      } else {
        v = graph_.addParam(name, type, p.attributes());
      }
      if (!p.atEnd()) p.fail("unexpected text after the declaration");
      values_.emplace(name, v);
      return;
    }
    if (keyword == "output") {
      std::string name = p.name("the output name");
      p.expect('=', "after the output name");
      Value* v = lookup(p);
      if (graph_.findOutput(name)) p.failAt(keywordAt, "output '" + name + "' is declared twice");
      graph_.setOutput(name, v);
      if (!p.atEnd()) p.fail("unexpected text after the output");
      return;
    }
    // An op with no results: "opname(...) : () phase".
    if (p.peek() == '(') return parseNodeRest(p, {}, keyword, keywordAt);
    p.failAt(keywordAt, "unknown declaration '" + std::string(keyword) + "'");
  }

  static bool isNumber(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  }

  Value* lookup(LineParser& p) {
    size_t at = (p.skipSpace(), p.pos());
    auto [name, quotedName] = p.valueRef();
    auto& table = quotedName || !isNumber(name) ? values_ : results_;
    auto it = table.find(name);
    if (it == table.end()) p.failAt(at, "'%" + name + "' is not defined before this use");
    return it->second;
  }

  void parseNode(LineParser& p) {
    std::vector<std::pair<std::string, size_t>> results;
    do {
      size_t at = (p.skipSpace(), p.pos());
      auto [name, quotedName] = p.valueRef();
      if (quotedName || !isNumber(name)) p.failAt(at, "node results are numbered (%0, %1, ...), got '%" + name + "'");
      results.emplace_back(name, at);
    } while (p.consume(','));
    p.expect('=', "after the results");
    size_t opAt = (p.skipSpace(), p.pos());
    std::string_view opName = p.identifier("an op name");
    parseNodeRest(p, results, opName, opAt);
  }

  void parseNodeRest(LineParser& p, const std::vector<std::pair<std::string, size_t>>& results, std::string_view opName,
                     size_t opAt) {
    const OpInfo* op = findOp(opName);
    if (!op) p.failAt(opAt, "unknown op '" + std::string(opName) + "'");
    p.expect('(', "after the op name");
    std::vector<Value*> operands;
    if (!p.consume(')')) {
      do operands.push_back(lookup(p));
      while (p.consume(','));
      p.expect(')', "to close the operands");
    }
    AttrMap attrs = p.attributes();
    p.expect(':', "before the result types");
    std::vector<TensorType> types;
    if (p.consume('(')) {
      p.expect(')', "(an op without results is typed '()')");
    } else {
      do types.push_back(p.tensorType());
      while (p.consume(','));
    }
    if (types.size() != results.size())
      p.fail(std::to_string(results.size()) + " result(s) but " + std::to_string(types.size()) + " type(s)");
    size_t phaseAt = (p.skipSpace(), p.pos());
    std::string_view phaseText = p.identifier("a phase (fwd, bwd, opt, recompute or comm)");
    std::optional<Phase> phase = parsePhase(phaseText);
    if (!phase) p.failAt(phaseAt, "unknown phase '" + std::string(phaseText) + "' (fwd, bwd, opt, recompute or comm)");
    std::string specName;
    if (p.consume('#')) specName = p.peek() == '"' ? p.quoted() : std::string(p.rest());
    if (!p.atEnd()) p.fail("unexpected text at the end of the node");
    for (const auto& [key, at] : results)
      if (results_.count(key)) p.failAt(at, "'%" + key + "' is already defined");
    Node* node = graph_.createUnchecked(*op, operands, std::move(attrs), std::move(types), *phase, std::move(specName));
    for (size_t i = 0; i < results.size(); ++i) results_.emplace(results[i].first, node->result(i));
  }

  std::string_view fileName_;
  Graph graph_;
  bool sawHeader_ = false;
  std::unordered_map<std::string, Value*> values_;   // inputs and parameters by name
  std::unordered_map<std::string, Value*> results_;  // node results by number ("12" for %12)
};

}  // namespace

Expected<Graph> parseGraph(std::string_view text, std::string_view fileName) {
  return GraphParser(fileName).parse(text);
}

}  // namespace gradc::ir
