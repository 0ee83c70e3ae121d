// Text in, text out: a pass test states its input and the IR it expects as text, with no YAML
// frontend in between. runOnText parses the input, applies the transformation, verifies the
// result, checks that the printed result parses back to itself, and returns it.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/ir/test_util.h"

namespace gradc::testing {

// `transform` may change the graph in place or return another (the result is what it leaves in
// its argument).
inline std::string runOnText(const std::string& input, const std::function<Status(ir::Graph&)>& transform) {
  ir::Graph g = parseOrFail(input);
  Status s = transform(g);
  if (!s) FAIL(s.message());
  Status verified = ir::verify(g);
  if (!verified) FAIL(verified.message());
  std::string printed = ir::printGraph(g);
  CHECK(ir::printGraph(parseOrFail(printed)) == printed);
  return printed;
}

// Replaces `g` by what `made` holds, or fails the test with its error.
inline Status take(ir::Graph& g, Expected<ir::Graph> made) {
  if (!made) return made.error();
  g = std::move(*made);
  return {};
}

}  // namespace gradc::testing
