#include "runtime/io/kernel_trust.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/io/atomic_file.h"
#include "runtime/io/sha256.h"

namespace gradc::runtime {
namespace {

constexpr size_t kKeyHexDigits = 64;

std::string bytesOfHex(std::string_view hex) {
  auto value = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(value(hex[i]) << 4 | value(hex[i + 1]));
  return out;
}

bool isKey(std::string_view text) {
  if (text.size() != kKeyHexDigits) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Equal strings, compared in time independent of where they differ.
bool sameTag(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Expected<std::string> randomKey() {
  std::array<unsigned char, kKeyHexDigits / 2> bytes{};
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{std::string("cannot open /dev/urandom: ") + std::strerror(errno)};
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != bytes.size()) return Error{"cannot read /dev/urandom"};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) (hex += kHex[b >> 4]) += kHex[b & 15];
  return hex;
}

}  // namespace

Expected<std::filesystem::path> kernelKeyPath() {
  if (const char* p = std::getenv("GRADC_KERNEL_KEY"); p && *p) return std::filesystem::path(p);
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::filesystem::path(x) / "gradc" / "kernel-key";
  if (const char* h = std::getenv("HOME"); h && *h) return std::filesystem::path(h) / ".config" / "gradc" / "kernel-key";
  if (const passwd* user = ::getpwuid(::getuid()); user && user->pw_dir && *user->pw_dir)
    return std::filesystem::path(user->pw_dir) / ".config" / "gradc" / "kernel-key";
  return Error{"no place for the kernel key: set GRADC_KERNEL_KEY, XDG_CONFIG_HOME or HOME"};
}

Expected<std::string> kernelKey(bool create) {
  Expected<std::filesystem::path> path = kernelKeyPath();
  if (!path) return path.error();
  Expected<std::string> text = readFile(*path);
  if (!text && create) {
    std::error_code ec;
    std::filesystem::create_directories(path->parent_path(), ec);
    Expected<std::string> key = randomKey();
    if (!key) return key.error();
    // Written beside the key's place, then linked there: link() never replaces a key another
    // process made in the meantime (that one is then read).
    std::string temp = path->string() + ".tmp-XXXXXX";  // mkstemp: mode 0600, a name of its own
    const int fd = ::mkstemp(temp.data());
    if (fd < 0) return Error{"cannot create the kernel key beside " + path->string() + ": " + std::strerror(errno)};
    const bool written = ::write(fd, key->data(), key->size()) == static_cast<ssize_t>(key->size()) && ::fsync(fd) == 0;
    int err = written ? 0 : errno;
    ::close(fd);
    const bool linked = written && (::link(temp.c_str(), path->c_str()) == 0 || errno == EEXIST);
    if (written && !linked) err = errno;
    ::unlink(temp.c_str());
    if (!linked) return Error{"cannot create the kernel key " + path->string() + ": " + std::strerror(err)};
    text = readFile(*path);
  }
  if (!text) return text.error().withContext("no kernel key: ");
  if (!isKey(*text)) return Error{"the kernel key " + path->string() + " is not 64 hex digits"};
  return *text;
}

std::string hmacSha256Hex(std::string_view key, std::string_view message) {
  std::string k(key);
  if (k.size() > 64) k = bytesOfHex(sha256Hex(k));
  k.resize(64, '\0');
  std::string inner(64, '\0'), outer(64, '\0');
  for (size_t i = 0; i < 64; ++i) {
    inner[i] = static_cast<char>(k[i] ^ 0x36);
    outer[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  return sha256Hex(outer + bytesOfHex(sha256Hex(inner + std::string(message))));
}

std::string kernelsTag(std::string_view key, std::string_view kernelsBytes, std::string_view graphText) {
  return hmacSha256Hex(bytesOfHex(key), "gradc-kernels-v1\n" + sha256Hex(kernelsBytes) + "\n" + sha256Hex(graphText));
}

Status checkKernelsTrusted(const std::string& tag, std::string_view kernelsBytes, std::string_view graphText,
                           const std::filesystem::path& kernelsFile, bool trusted) {
  if (trusted) return {};
  const std::string refuse = "refusing to load the native kernels " + kernelsFile.string() + ": ";
  const std::string remedy = "; run its reference step without them (--no-generated-kernels), recompile the spec "
                             "here (gradc compile SPEC -o DIR), or pass --trust-kernels if you trust where this "
                             "artifact came from";
  if (tag.empty()) return Error{refuse + "the artifact records no tag of them (made by another gradc?)" + remedy};
  Expected<std::string> key = kernelKey(/*create=*/false);
  if (!key) return Error{refuse + "they cannot be checked (" + key.error().message + ")" + remedy};
  if (!sameTag(tag, kernelsTag(*key, kernelsBytes, graphText)))
    return Error{refuse + "they were not compiled for this graph by this user on this machine, or were changed since" +
                 remedy};
  return {};
}

}  // namespace gradc::runtime
