// Writing command output: to stdout for "-" or no file, else atomically (temporary file in
// the same folder, then rename) so an interrupted write never leaves a half-written file.
#pragma once

#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::tools {

gradc::Status writeOutput(const std::string& path, std::string_view text);
// Reads a whole file, or stdin for "-"; bounded by maxBytes.
gradc::Expected<std::string> readInput(const std::string& path, std::size_t maxBytes);

}  // namespace gradc::tools
