// A fresh folder under the system temp dir for one test, removed at scope exit. The name is
// made unique per process, so test binaries can run in parallel.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gradc::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("gradc_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path operator/(const std::string& file) const { return path / file; }
  // Writes `text` to a file in the folder and returns its path.
  std::filesystem::path write(const std::string& file, const std::string& text) const {
    std::ofstream(path / file, std::ios::binary) << text;
    return path / file;
  }
};

}  // namespace gradc::testing
