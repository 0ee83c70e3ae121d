// A YAML document as a small immutable tree that remembers where every node came from.
//
// The tree is built from yaml-cpp's event parser rather than from YAML::Node, so that the
// frontend controls every cost an input can cause:
//  - the alias-expanded size of the document is counted while it is read, and reading stops
//    at the alias that pushes it past the limit (a "billion laughs" file costs nothing);
//  - an alias to a node that contains it (a cycle) is rejected;
//  - duplicate keys in a mapping are rejected (YAML forbids them; yaml-cpp keeps both);
//  - an alias shares its anchor's children, so the tree stays as small as the text.
// Positions are 1-based line and column, as diagnostics print them.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradc::frontend {

struct SourcePos {
  int line = 0;  // 1-based; 0 = no position
  int column = 0;
};

struct YamlNode {
  enum class Kind : std::uint8_t { Null, Scalar, Sequence, Map };

  Kind kind = Kind::Null;
  bool quoted = false;    // the scalar's text starts one column after `pos` (behind its quote)
  bool verbatim = false;  // the scalar's text is written as is on one line, so textPos is exact
  SourcePos pos;         // where the node starts; for an alias, where the alias is written
  std::int64_t expandedSize = 1;  // nodes in this subtree with aliases expanded
  std::string_view text;          // Scalar (owned by the document)
  std::vector<const YamlNode*> items;                                // Sequence
  std::vector<std::pair<const YamlNode*, const YamlNode*>> entries;  // Map: (key, value) in order

  bool isNull() const { return kind == Kind::Null; }
  bool isScalar() const { return kind == Kind::Scalar; }
  bool isSequence() const { return kind == Kind::Sequence; }
  bool isMap() const { return kind == Kind::Map; }

  // Map lookup by scalar key; nullptr when absent.
  const YamlNode* get(std::string_view key) const;
  const YamlNode* keyNode(std::string_view key) const;
  // Position of byte `offset` of a scalar's text; the scalar's own position when the text is
  // not written verbatim (escapes, line folding, an alias).
  SourcePos textPos(size_t offset) const;
};

// "a mapping", "a list", "null" or "'text'", for messages such as "expected a list, got ...".
std::string describeNode(const YamlNode& node);

class YamlDocument {
 public:
  const YamlNode* root() const { return root_; }

 private:
  friend class YamlTreeBuilder;
  std::deque<YamlNode> nodes_;
  std::deque<std::string> texts_;
  const YamlNode* root_ = nullptr;
};

struct YamlError {
  SourcePos pos;
  std::string message;
  std::string hint;
};

struct YamlParseResult {
  std::unique_ptr<YamlDocument> document;  // set on success
  YamlError error;
};

// Parses exactly one YAML document. Fails on YAML syntax errors, an empty input, more than
// one document, duplicate keys, cyclic aliases, or more than maxNodes alias-expanded nodes.
YamlParseResult parseYaml(std::string_view text, std::int64_t maxNodes);

}  // namespace gradc::frontend
