#include "runtime/io/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>

#include "runtime/io/file_mapping.h"

namespace gradc::runtime {
namespace {

constexpr std::int64_t kLlmcHeaderBytes = 256 * 4;

std::int32_t littleEndian32(const unsigned char* p) {
  return static_cast<std::int32_t>(std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                                   std::uint32_t{p[3]} << 24);
}

}  // namespace

bool hasLlmcTokenHeader(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  std::array<unsigned char, 4> magic{};
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const bool read = regular && ::pread(fd, magic.data(), magic.size(), 0) == static_cast<ssize_t>(magic.size());
  ::close(fd);
  return read && littleEndian32(magic.data()) == kLlmcTokenMagic;
}

Expected<TokenFile> mapTokenFile(const std::filesystem::path& path) {
  const std::string name = "token file '" + path.string() + "'";
  Expected<FileMapping> mapping = FileMapping::map(path);
  if (!mapping) return mapping.error().withContext("token file: ");
  const std::int64_t bytes = mapping->size();
  if (bytes == 0) return Error{name + " is empty"};
  // Batches read windows at scattered offsets: no read-ahead of the whole file.
  mapping->advise(FileMapping::Access::random);
  TokenFile f;
  f.mapping = mapping->pages();
  const unsigned char* raw = mapping->data();
  if (bytes >= 4 && littleEndian32(raw) == kLlmcTokenMagic) {
    if (bytes < kLlmcHeaderBytes) return Error{name + ": llm.c's header is 1024 bytes, the file has " + std::to_string(bytes)};
    const std::int32_t version = littleEndian32(raw + 4), count = littleEndian32(raw + 8);
    if (version != 1) return Error{name + ": llm.c token format version " + std::to_string(version) + " (this reads version 1, uint16 tokens)"};
    if (count < 0 || kLlmcHeaderBytes + 2 * static_cast<std::int64_t>(count) != bytes)
      return Error{name + ": its header counts " + std::to_string(count) + " tokens, but " +
                   std::to_string(bytes - kLlmcHeaderBytes) + " bytes follow it (" +
                   std::to_string((bytes - kLlmcHeaderBytes) / 2) + " tokens): truncated or not llm.c's format"};
    f.ids = reinterpret_cast<const std::uint16_t*>(raw + kLlmcHeaderBytes);
    f.count = count;
    f.format = "llm.c";
  } else {
    if (bytes % 2 != 0)
      return Error{name + " has an odd length (" + std::to_string(bytes) +
                   " bytes): nanoGPT's token files are uint16 ids with no header"};
    f.ids = reinterpret_cast<const std::uint16_t*>(raw);
    f.count = bytes / 2;
    f.format = "nanoGPT";
  }
  if (f.count == 0) return Error{name + " holds no tokens"};
  return f;
}

}  // namespace gradc::runtime
