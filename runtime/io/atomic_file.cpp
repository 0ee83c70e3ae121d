#include "runtime/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace gradc::runtime {

namespace {

std::filesystem::path folderOf(const std::filesystem::path& path) {
  std::filesystem::path dir = path.parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

// Closes `fd`, retrying nothing: on Linux the descriptor is released even when close fails,
// and a failure here can only mean lost data, which the caller reports.
int closeFd(int fd) { return ::close(fd) == 0 ? 0 : errno; }

}  // namespace

bool isEnvironmentErrno(int err) {
  for (int environment : {ENOSPC, EDQUOT, EIO, EROFS, EFBIG, ENOMEM})
    if (err == environment) return true;
  return false;
}

Error ioError(std::string_view what, const std::filesystem::path& path, int err) {
  return Error{std::string(what) + " '" + path.string() + "': " + std::strerror(err),
               isEnvironmentErrno(err) ? ErrorKind::Environment : ErrorKind::User};
}

Status syncDirectory(const std::filesystem::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ioError("cannot open folder", dir, errno);
  int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  // Some filesystems cannot sync a folder (EINVAL); there is nothing more to make durable there.
  if (err != 0 && err != EINVAL && err != ENOTSUP) return ioError("cannot fsync folder", dir, err);
  return Status::success();
}

namespace {

// Where writing `path` lands: a symlink (chain) is followed to the file it names, which may not
// exist yet; an Error for a loop.
Expected<std::filesystem::path> followLinks(std::filesystem::path path) {
  for (int depth = 0; depth < 40; ++depth) {
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return path;
    std::error_code ec;
    std::filesystem::path target = std::filesystem::read_symlink(path, ec);
    if (ec) return ioError("cannot read the link", path, ec.value());
    path = target.is_absolute() ? target : folderOf(path) / target;
  }
  return Error{"cannot write '" + path.string() + "': too many levels of symbolic links"};
}

}  // namespace

Expected<AtomicFileWriter> AtomicFileWriter::open(const std::filesystem::path& requested) {
  if (requested.filename().empty()) return Error{"cannot write '" + requested.string() + "': not a file name"};
  Expected<std::filesystem::path> resolved = followLinks(requested);
  if (!resolved) return resolved.error();
  const std::filesystem::path& path = *resolved;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    // Never replaced: a character device (/dev/null, a terminal) or a FIFO is written directly;
    // anything else is refused.
    if (S_ISCHR(info.st_mode) || S_ISFIFO(info.st_mode)) {
      int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return ioError("cannot open", path, errno);
      return AtomicFileWriter(path, std::filesystem::path(), fd);
    }
    const char* what = S_ISDIR(info.st_mode) ? "a folder" : S_ISBLK(info.st_mode) ? "a block device" : "not a regular file";
    return Error{"cannot write '" + requested.string() + "': it is " + std::string(what) + ", which gradc does not replace"};
  }
  static std::atomic<unsigned> counter{0};
  const std::filesystem::path dir = folderOf(path);
  const std::string stem = "." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-";
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::filesystem::path temp = dir / (stem + std::to_string(counter.fetch_add(1)));
    // 0666 filtered by the umask: the same permissions a plain fopen(path, "w") would give.
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return AtomicFileWriter(path, std::move(temp), fd);
    if (errno != EEXIST) return ioError("cannot create temporary file for", path, errno);
  }
  return Error{"cannot create temporary file for '" + path.string() + "': too many stale temporaries"};
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)), temp_(std::move(other.temp_)), fd_(std::exchange(other.fd_, -1)) {}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept {
  if (this != &other) {
    abandon();
    path_ = std::move(other.path_);
    temp_ = std::move(other.temp_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
  fd_ = -1;
}

Status AtomicFileWriter::write(const void* data, std::size_t size) {
  if (fd_ < 0) return Error{"write to '" + path_.string() + "' after the writer finished"};
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; larger requests simply come back short.
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      abandon();
      return ioError("cannot write", path_, err);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return Status::success();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0) return Error{"commit of '" + path_.string() + "' after the writer finished"};
  if (temp_.empty()) {  // written directly (a device or FIFO): nothing to rename or sync
    int err = closeFd(std::exchange(fd_, -1));
    return err == 0 ? Status::success() : ioError("cannot close", path_, err);
  }
  if (::fsync(fd_) != 0) {
    int err = errno;
    abandon();
    return ioError("cannot fsync", path_, err);
  }
  int err = closeFd(std::exchange(fd_, -1));
  if (err != 0) {
    ::unlink(temp_.c_str());
    return ioError("cannot close", path_, err);
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    err = errno;
    ::unlink(temp_.c_str());
    return ioError("cannot rename temporary file onto", path_, err);
  }
  return syncDirectory(folderOf(path_));
}

Expected<std::string> readFile(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever; it is
  // refused below as not a regular file (for which the flag changes nothing).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ioError("cannot open", path, errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int err = errno;
    ::close(fd);
    return ioError("cannot stat", path, err);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Error{"cannot read '" + path.string() + "': not a regular file"};
  }
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ioError("cannot read", path, err);
    }
    if (n == 0) break;  // the file shrank since fstat
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  bytes.resize(done);
  return bytes;
}

Status writeFileAtomic(const std::filesystem::path& path, std::string_view bytes) {
  Expected<AtomicFileWriter> writer = AtomicFileWriter::open(path);
  if (!writer) return writer.error();
  if (Status s = writer->write(bytes); !s) return s;
  return writer->commit();
}

}  // namespace gradc::runtime
