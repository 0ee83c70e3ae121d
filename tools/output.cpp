#include "tools/output.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include "runtime/io/atomic_file.h"
#include "tools/commands.h"

namespace gradc::tools {
namespace {
constexpr const char* kStdoutFailure = "cannot write to standard output";
}  // namespace

gradc::Status writeOutput(const std::string& path, std::string_view text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) return environmentError(std::string(kStdoutFailure) + " (disk full, or the reader went away?)");
    return {};
  }
  return runtime::writeFileAtomic(path, text);
}

int reportWriteFailure(const gradc::Status& failure) {
  std::cerr << "gradc: error: " << failure.message() << "\n";
  return exitCodeFor(failure.error());
}

gradc::Expected<std::string> readInput(const std::string& path, std::size_t maxBytes) {
  std::string text;
  std::istream* in = &std::cin;
  std::ifstream file;
  if (path != "-") {
    // A FIFO, a device or a folder would block or never end: only regular files (stdin: "-").
    std::error_code ec;
    const auto type = std::filesystem::status(path, ec).type();
    if (!ec && type != std::filesystem::file_type::regular)
      return Error{"cannot read '" + path + "': not a regular file (use - for standard input)"};
    file.open(path, std::ios::binary);
    if (!file) return Error{"cannot read '" + path + "'"};
    in = &file;
  }
  char buf[1 << 16];
  while (*in) {
    in->read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in->gcount()));
    if (text.size() > maxBytes) return Error{"'" + path + "' is larger than " + std::to_string(maxBytes) + " bytes"};
  }
  return text;
}

}  // namespace gradc::tools
