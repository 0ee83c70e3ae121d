#include "tools/output.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

namespace gradc::tools {

gradc::Status writeOutput(const std::string& path, std::string_view text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return {};
  }
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::FILE* f = std::fopen(temp.c_str(), "wb");
    if (!f) return Error{"cannot write '" + path + "'"};
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = std::fflush(f) == 0 && ok;
    ok = ::fsync(::fileno(f)) == 0 && ok;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) {
      std::remove(temp.c_str());
      return Error{"cannot write '" + path + "'"};
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    return Error{"cannot write '" + path + "': " + ec.message()};
  }
  return {};
}

gradc::Expected<std::string> readInput(const std::string& path, std::size_t maxBytes) {
  std::string text;
  std::istream* in = &std::cin;
  std::ifstream file;
  if (path != "-") {
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
