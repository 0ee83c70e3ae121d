// Read-only memory maps of whole regular files: token files, text corpora and image data are
// read through one, so opening a file larger than memory costs nothing and its pages are read
// from the page cache only as batches touch them.
//
// Opening never blocks: the file is opened with O_NONBLOCK and anything but a regular file (a
// FIFO, a folder, a device such as /dev/zero) is refused before it is mapped or read. Error
// messages have the shape of runtime/io/atomic_file.h's readFile ("cannot open '<path>': <reason>",
// "cannot read '<path>': not a regular file"), so callers prefix them with what the file is.
//
// A pass over the whole file (a vocabulary built from a corpus, every byte checked) goes through
// forEachChunk, which hands the mapping out in chunks and drops each chunk's pages from the
// process after it is visited: the resident set stays at one chunk however large the file, and
// the pages remain in the page cache for the batches that follow.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string_view>

#include "ir/status.h"

namespace gradc::runtime {

class FileMapping {
 public:
  // How the pages will be read next, a hint to the kernel's read-ahead.
  enum class Access { sequential, random };

  // Maps `path`. An empty file is not an error: it maps to no bytes.
  static Expected<FileMapping> map(const std::filesystem::path& path);

  const unsigned char* data() const { return static_cast<const unsigned char*>(pages_.get()); }
  std::int64_t size() const { return size_; }
  std::string_view bytes() const { return {reinterpret_cast<const char*>(data()), static_cast<std::size_t>(size_)}; }
  // Shares ownership of the pages: they stay mapped while any copy of this is alive.
  const std::shared_ptr<const void>& pages() const { return pages_; }

  void advise(Access access) const;
  // Drops the pages of [offset, offset + length) from this process (they are read again, from
  // the page cache or the file, when next touched).
  void release(std::int64_t offset, std::int64_t length) const;

  // Calls visit(chunk, offset) on consecutive chunks of the file until it returns false or the
  // file ends, releasing each chunk after its visit. Returns whether every chunk was visited.
  template <class Visit>
  bool forEachChunk(Visit&& visit) const {
    constexpr std::int64_t kChunk = std::int64_t{16} << 20;
    advise(Access::sequential);
    bool all = true;
    for (std::int64_t offset = 0; offset < size_ && all; offset += kChunk) {
      const std::int64_t length = std::min(kChunk, size_ - offset);
      all = visit(bytes().substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(length)), offset);
      release(offset, length);
    }
    return all;
  }

 private:
  FileMapping(std::shared_ptr<const void> pages, std::int64_t size) : pages_(std::move(pages)), size_(size) {}
  std::shared_ptr<const void> pages_;  // null for an empty file
  std::int64_t size_ = 0;
};

}  // namespace gradc::runtime
