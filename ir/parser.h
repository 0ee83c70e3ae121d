// Parser of the IR text format written by ir/printer.h. Errors carry "file:line:col".
// The parsed graph is verified (ir::verify) before it is returned.
#pragma once

#include <string_view>

#include "ir/graph.h"
#include "ir/status.h"

namespace gradc::ir {

Expected<Graph> parseGraph(std::string_view text, std::string_view fileName = "<input>");

}  // namespace gradc::ir
