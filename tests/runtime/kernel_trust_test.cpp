// The trust model for native kernels: HMAC-SHA256 against RFC 4231, the per-user key (made once,
// private, kept), and which tags checkKernelsTrusted accepts.
#include "runtime/io/kernel_trust.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "runtime/io/atomic_file.h"
#include "tests/temp_dir.h"

#include <doctest/doctest.h>

using namespace gradc;
using namespace gradc::runtime;

TEST_CASE("kernel trust: HMAC-SHA256 matches RFC 4231") {
  CHECK(hmacSha256Hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (RFC 4231, test case 6).
  CHECK(hmacSha256Hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("kernel trust: the key is made once, private, and decides which tags are accepted") {
  testing::TempDir dir("kernel_trust");
  const std::string keyFile = (dir.path / "sub" / "kernel-key").string();
  ::setenv("GRADC_KERNEL_KEY", keyFile.c_str(), 1);
  CHECK_FALSE(kernelKey(/*create=*/false).ok());
  // Without a key nothing is trusted, and the message says how to proceed.
  Status none = checkKernelsTrusted(std::string(64, 'a'), "so", "graph", "step.kernels.so", false);
  REQUIRE_FALSE(none.ok());
  CHECK(none.message().find("--trust-kernels") != std::string::npos);

  Expected<std::string> key = kernelKey(/*create=*/true);
  REQUIRE(key.ok());
  CHECK(key->size() == 64);
  struct stat info {};
  REQUIRE(::stat(keyFile.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0600);
  CHECK(*kernelKey(true) == *key);  // kept, never replaced
  CHECK(*readFile(keyFile) == *key);

  const std::string tag = kernelsTag(*key, "so bytes", "graph text");
  CHECK(checkKernelsTrusted(tag, "so bytes", "graph text", "k.so", false).ok());
  CHECK_FALSE(checkKernelsTrusted(tag, "other so", "graph text", "k.so", false).ok());      // replaced kernels
  CHECK_FALSE(checkKernelsTrusted(tag, "so bytes", "other graph", "k.so", false).ok());     // another graph
  CHECK_FALSE(checkKernelsTrusted("", "so bytes", "graph text", "k.so", false).ok());       // untagged
  CHECK(checkKernelsTrusted("", "so bytes", "graph text", "k.so", /*trusted=*/true).ok());  // the user's word
  CHECK(kernelsTag(std::string(64, '0'), "so bytes", "graph text") != tag);               // another user's key
  ::unsetenv("GRADC_KERNEL_KEY");
}
