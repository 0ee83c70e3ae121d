// Read-only whole-file maps (runtime/io/file_mapping.h).
#include "runtime/io/file_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/io/atomic_file.h"

namespace gradc::runtime {

Expected<FileMapping> FileMapping::map(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever; it is
  // refused below as not a regular file (for which the flag changes nothing).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ioError("cannot open", path, errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int err = errno;
    ::close(fd);
    return ioError("cannot stat", path, err);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error{"cannot read '" + path.string() + "': not a regular file"};
  }
  const auto size = static_cast<std::int64_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return FileMapping(nullptr, 0);
  }
  void* base = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int mapError = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (base == MAP_FAILED) return ioError("cannot map", path, mapError);
  std::shared_ptr<const void> pages(base, [size](const void* p) { ::munmap(const_cast<void*>(p), static_cast<std::size_t>(size)); });
  return FileMapping(std::move(pages), size);
}

void FileMapping::advise(Access access) const {
  if (size_ == 0) return;
  (void)::madvise(const_cast<void*>(pages_.get()), static_cast<std::size_t>(size_),
                  access == Access::sequential ? MADV_SEQUENTIAL : MADV_RANDOM);
}

void FileMapping::release(std::int64_t offset, std::int64_t length) const {
  // madvise takes whole pages: round the start down; the end of the last page is the file's.
  const auto page = static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
  const std::int64_t begin = offset / page * page;
  const std::int64_t end = std::min(size_, offset + length);
  if (end <= begin) return;
  // The mapping is read-only and private: no page was ever written, so dropping them loses
  // nothing; the next touch reads the file's bytes again.
  (void)::madvise(const_cast<unsigned char*>(data()) + begin, static_cast<std::size_t>(end - begin), MADV_DONTNEED);
}

}  // namespace gradc::runtime
