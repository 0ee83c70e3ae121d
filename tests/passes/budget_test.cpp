// Byte budgets: every accepted form, and the errors.
#include <doctest/doctest.h>

#include "passes/budget.h"

using gradc::passes::formatBytes;
using gradc::passes::formatBytesExact;
using gradc::passes::parseBytes;

namespace {
std::int64_t ok(const char* text) {
  auto r = parseBytes(text);
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.error().message));
  return *r;
}
std::string bad(const char* text) {
  auto r = parseBytes(text);
  REQUIRE_FALSE_MESSAGE(r.ok(), text << " was accepted");
  return r.error().message;
}
}  // namespace

TEST_CASE("integers and binary units") {
  CHECK(ok("200000000") == 200000000);
  CHECK(ok("1_000_000") == 1000000);
  CHECK(ok("512B") == 512);
  CHECK(ok("64KiB") == 64 * 1024);
  CHECK(ok("512MiB") == 512LL * 1024 * 1024);
  CHECK(ok("1.5GiB") == 3LL * 512 * 1024 * 1024);
  CHECK(ok("2TiB") == 2LL << 40);
  CHECK(ok(" 200 MiB ") == 200LL << 20);
  CHECK(ok("0.5KiB") == 512);
}

TEST_CASE("decimal units and case") {
  CHECK(ok("2GB") == 2000000000);
  CHECK(ok("200MB") == 200000000);
  CHECK(ok("64kB") == 64000);
  CHECK(ok("64KB") == 64000);
  CHECK(ok("1.25TB") == 1250000000000LL);
  CHECK(ok("512mib") == ok("512MiB"));
  CHECK(ok("2gb") == ok("2GB"));
  CHECK(ok("1.0000000001GB") == 1000000000);  // fractions of a byte round down
}

TEST_CASE("errors list the accepted forms") {
  for (const char* text : {"", "MiB", "-5MiB", "0", "0MiB", "12 parsecs", "1.5", "1.MiB", "5e9", "1GiBB", "0x10",
                           "99999999999999999999", "9000000TiB", "8EiB"}) {
    CAPTURE(text);
    std::string message = bad(text);
    CHECK(message.find("accepted:") != std::string::npos);
    CHECK(message.find("512MiB") != std::string::npos);
  }
  CHECK(bad("12 parsecs").find("unknown unit 'parsecs'") != std::string::npos);
  CHECK(bad("9000000TiB").find("larger than") != std::string::npos);
  CHECK(bad("-1").find("positive") != std::string::npos);
  CHECK(ok("9223372036854775807") == 9223372036854775807LL);
  CHECK(bad("9223372036854775808").find("larger than") != std::string::npos);
}

TEST_CASE("formatting") {
  CHECK(formatBytes(0) == "0 B");
  CHECK(formatBytes(1023) == "1023 B");
  CHECK(formatBytes(1024) == "1.0 KiB");
  CHECK(formatBytes(200LL << 20) == "200.0 MiB");
  CHECK(formatBytes(3LL << 29) == "1.5 GiB");
  CHECK(formatBytes(-2048) == "-2.0 KiB");
  CHECK(formatBytesExact(222625792) == "212.3 MiB (222,625,792 bytes)");
  // What is printed reads back.
  CHECK(ok("200.0 MiB") == 200LL << 20);
}
