// Builds the YamlNode tree from yaml-cpp parser events; see yaml_tree.h for the guarantees.
#include "frontend/yaml_tree.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <sstream>
#include <unordered_map>

#include "frontend/suggest.h"

namespace gradc::frontend {

const YamlNode* YamlNode::get(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k->isScalar() && k->text == key) return v;
  return nullptr;
}

const YamlNode* YamlNode::keyNode(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k->isScalar() && k->text == key) return k;
  return nullptr;
}

SourcePos YamlNode::textPos(size_t offset) const {
  if (pos.line == 0 || !verbatim) return pos;
  SourcePos p = pos;
  p.column += static_cast<int>(offset) + (quoted ? 1 : 0);
  return p;
}

std::string describeNode(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::Null: return "nothing (null)";
    case YamlNode::Kind::Sequence: return "a list";
    case YamlNode::Kind::Map: return "a mapping";
    case YamlNode::Kind::Scalar: break;
  }
  constexpr size_t kShown = 40;
  std::string text;
  for (char c : node.text.substr(0, kShown)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789abcdef";
      text += std::string("\\x") + hex[u >> 4] + hex[u & 0xf];
    } else {
      text += c;
    }
  }
  return "'" + text + (node.text.size() > kShown ? "...'" : "'");
}

namespace {

// Thrown by the builder to stop the parser at the first problem; never leaves parseYaml.
struct StopParsing {
  YamlError error;
};

SourcePos toPos(const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0) return {};
  return {mark.line + 1, mark.column + 1};
}

}  // namespace

class YamlTreeBuilder : public YAML::EventHandler {
 public:
  YamlTreeBuilder(std::string_view source, YamlDocument& doc, std::int64_t maxNodes)
      : source_(source), doc_(doc), maxNodes_(maxNodes) {}

  // The innermost open flow collection of that kind (for "never closed" errors).
  SourcePos innermostFlow(YamlNode::Kind kind) const {
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it)
      if (it->flow && it->node->kind == kind) return it->node->pos;
    return {};
  }

  int documents() const { return documents_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ > 1)
      throw StopParsing{{toPos(mark), "a spec file holds one YAML document, but a second one starts here",
                         "remove the '---' line and what follows, or merge the documents"}};
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    YamlNode& node = newNode(YamlNode::Kind::Null, mark);
    finish(node, anchor);
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    YamlNode& node = newNode(YamlNode::Kind::Scalar, mark);
    node.text = doc_.texts_.emplace_back(value);
    if (mark.pos >= 0 && static_cast<size_t>(mark.pos) < source_.size()) {
      size_t at = static_cast<size_t>(mark.pos);
      node.quoted = source_[at] == '"' || source_[at] == '\'';
      std::string_view written = source_.substr(at + (node.quoted ? 1 : 0), value.size());
      node.verbatim = written == value && value.find('\n') == std::string::npos;
    }
    finish(node, anchor);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end() || it->second == nullptr)
      throw StopParsing{{toPos(mark), "this alias refers to a node that contains it (a cycle)",
                         "an alias may only repeat a node that is complete before it"}};
    const YamlNode* target = it->second;
    total_ += target->expandedSize;
    if (total_ > maxNodes_)
      throw StopParsing{{toPos(mark), "YAML aliases expand to more than " + std::to_string(maxNodes_) + " nodes",
                         "each alias copies its anchor's whole subtree; a spec never needs this many"}};
    // A shallow copy that shares the target's children, positioned at the alias.
    YamlNode& node = doc_.nodes_.emplace_back(*target);
    node.pos = toPos(mark);
    node.verbatim = false;
    attach(node);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value style) override {
    open(YamlNode::Kind::Sequence, mark, anchor, style);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value style) override {
    open(YamlNode::Kind::Map, mark, anchor, style);
  }
  void OnMapEnd() override {
    checkDuplicateKeys(*stack_.back().node);
    close();
  }

 private:
  struct Open {
    YamlNode* node;
    YAML::anchor_t anchor;
    bool flow;
    const YamlNode* pendingKey = nullptr;
  };

  YamlNode& newNode(YamlNode::Kind kind, const YAML::Mark& mark) {
    if (++total_ > maxNodes_)
      throw StopParsing{{toPos(mark), "the YAML document has more than " + std::to_string(maxNodes_) + " nodes", ""}};
    YamlNode& node = doc_.nodes_.emplace_back();
    node.kind = kind;
    node.pos = toPos(mark);
    return node;
  }

  void open(YamlNode::Kind kind, const YAML::Mark& mark, YAML::anchor_t anchor, YAML::EmitterStyle::value style) {
    YamlNode& node = newNode(kind, mark);
    if (anchor) anchors_[anchor] = nullptr;  // known, but not complete: aliases to it are cycles
    stack_.push_back(Open{&node, anchor, style == YAML::EmitterStyle::Flow});
  }

  void close() {
    Open top = stack_.back();
    stack_.pop_back();
    finish(*top.node, top.anchor);
  }

  void finish(YamlNode& node, YAML::anchor_t anchor) {
    if (anchor) anchors_[anchor] = &node;
    attach(node);
  }

  // Hands a complete node to its parent (or makes it the root).
  void attach(const YamlNode& node) {
    if (stack_.empty()) {
      doc_.root_ = &node;
      return;
    }
    Open& parent = stack_.back();
    parent.node->expandedSize += node.expandedSize;
    if (parent.node->isSequence()) {
      parent.node->items.push_back(&node);
    } else if (!parent.pendingKey) {
      parent.pendingKey = &node;
    } else {
      parent.node->entries.emplace_back(parent.pendingKey, &node);
      parent.pendingKey = nullptr;
    }
  }

  static void checkDuplicateKeys(const YamlNode& map) {
    std::unordered_map<std::string_view, SourcePos> seen;
    for (const auto& [key, value] : map.entries) {
      if (!key->isScalar()) continue;
      auto [it, inserted] = seen.emplace(key->text, key->pos);
      if (!inserted)
        throw StopParsing{{key->pos, "duplicate key '" + clip(key->text) + "'",
                           "the first '" + clip(key->text) + "' is at line " +
                               std::to_string(it->second.line) + "; a mapping may hold each key once"}};
    }
  }

  std::string_view source_;
  YamlDocument& doc_;
  std::int64_t maxNodes_;
  std::int64_t total_ = 0;
  int documents_ = 0;
  std::vector<Open> stack_;
  std::unordered_map<YAML::anchor_t, const YamlNode*> anchors_;
};

YamlParseResult parseYaml(std::string_view text, std::int64_t maxNodes) {
  YamlParseResult result;
  auto doc = std::make_unique<YamlDocument>();
  YamlTreeBuilder builder(text, *doc, maxNodes);
  std::istringstream stream{std::string(text)};
  try {
    YAML::Parser parser(stream);
    bool any = parser.HandleNextDocument(builder);
    if (any && builder.documents() == 1) parser.HandleNextDocument(builder);  // a second one is an error
  } catch (const StopParsing& stop) {
    result.error = stop.error;
    return result;
  } catch (const YAML::DeepRecursion& e) {
    result.error.pos = toPos(e.mark);
    result.error.message = "not valid YAML for a spec: collections nest " + std::to_string(e.depth()) +
                           " or more levels deep";
    return result;
  } catch (const YAML::Exception& e) {
    result.error.pos = toPos(e.mark);
    result.error.message = "not valid YAML: " + e.msg;
    // yaml-cpp reports an unclosed flow collection at the start of the document; point at
    // the bracket that is never closed instead.
    if (e.msg == YAML::ErrorMsg::END_OF_SEQ_FLOW || e.msg == YAML::ErrorMsg::END_OF_MAP_FLOW) {
      bool seq = e.msg == YAML::ErrorMsg::END_OF_SEQ_FLOW;
      SourcePos open = builder.innermostFlow(seq ? YamlNode::Kind::Sequence : YamlNode::Kind::Map);
      if (open.line) {
        result.error.pos = open;
        result.error.message = std::string("not valid YAML: this '") + (seq ? "[" : "{") + "' is never closed";
      }
    }
    return result;
  } catch (const std::exception& e) {
    result.error.message = std::string("could not read the YAML: ") + e.what();
    return result;
  }
  if (!doc->root()) {
    result.error = {{1, 1}, "the spec is empty", "a spec is a mapping with 'model', 'inputs', 'layers' and 'loss'"};
    return result;
  }
  result.document = std::move(doc);
  return result;
}

}  // namespace gradc::frontend
