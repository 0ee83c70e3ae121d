// Writing command output: to stdout for "-" or no file (a failed write is an Error), else
// through runtime/io/atomic_file.h: a regular file atomically (temporary file, then rename), a
// symlink's target, a device or FIFO directly; never replacing what is not a regular file.
#pragma once

#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::tools {

gradc::Status writeOutput(const std::string& path, std::string_view text);
// Prints a failed write ("gradc: error: ...") and returns the exit code of its kind: 1 when the
// environment failed (standard output closed or full, a full or failing disk: runtime::ioError
// classifies errno), 2 when the path the user gave cannot work (a missing folder, no
// permission, a folder where a file must be).
int reportWriteFailure(const gradc::Status& failure);
// Reads a whole file, or stdin for "-"; bounded by maxBytes.
gradc::Expected<std::string> readInput(const std::string& path, std::size_t maxBytes);

}  // namespace gradc::tools
