// File I/O helpers: crash-safe replacement of a file, whole-file reads, I/O error messages.
//
// A file written through this header is either the complete new content or the previous file,
// never a torn mix: bytes go to a temporary file in the same folder (same filesystem, so the
// final rename is atomic), the temporary is flushed and fsync'ed, renamed over the target, and
// the folder is fsync'ed so the rename itself survives a power cut. On any error the temporary
// is removed and the target is left untouched.
//
// What is never destroyed: a symlink is followed and its target written (the link stays); a
// character device (/dev/null, a terminal) or a FIFO that exists is written directly, not
// replaced; a folder, block device or socket is refused.
//
// POSIX only (open/fsync/rename). Temporary names are "<dir>/.<name>.tmp-<pid>-<n>"; a crash
// can leave such a file behind, and it is never read by anything.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "ir/status.h"

namespace gradc::runtime {

// Streaming writer for a file that appears atomically on commit(). Destroying a writer that
// was not committed (an error path, an exception) removes the temporary file.
class AtomicFileWriter {
 public:
  // Creates the temporary file next to `path`. The folder must exist.
  static Expected<AtomicFileWriter> open(const std::filesystem::path& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  // Appends bytes (loops over short writes and EINTR).
  Status write(const void* data, std::size_t size);
  Status write(std::string_view bytes) { return write(bytes.data(), bytes.size()); }

  // fsync, close, rename over the target, fsync the folder. The writer is finished afterwards,
  // whether or not this succeeded.
  Status commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  AtomicFileWriter(std::filesystem::path path, std::filesystem::path temp, int fd)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd) {}
  void abandon();

  std::filesystem::path path_;
  std::filesystem::path temp_;
  int fd_ = -1;
};

// Replaces `path` with `bytes` atomically (see above).
Status writeFileAtomic(const std::filesystem::path& path, std::string_view bytes);

// The whole content of a regular file (not a folder, device or pipe).
Expected<std::string> readFile(const std::filesystem::path& path);

// fsync of a folder, so that entries created, renamed or removed in it are durable.
Status syncDirectory(const std::filesystem::path& dir);

// Whether an errno is the environment's -- a full or failing disk, a quota, a read-only or too
// small file system, memory exhausted -- rather than a path the user gave that cannot work (a
// missing folder, no permission, a file where a folder must be).
bool isEnvironmentErrno(int err);

// "<what> '<path>': <strerror(err)>", the shape of every I/O error in the runtime; of kind
// ErrorKind::Environment when isEnvironmentErrno(err), else ErrorKind::User.
Error ioError(std::string_view what, const std::filesystem::path& path, int err);

}  // namespace gradc::runtime
