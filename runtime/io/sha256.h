// SHA-256 (FIPS 180-4), for the checksums of compiled artifacts: which spec an artifact came
// from, and that none of its files changed since it was written.
#pragma once

#include <string>
#include <string_view>

namespace gradc::runtime {

// The digest of `data` as 64 lowercase hex digits.
std::string sha256Hex(std::string_view data);

}  // namespace gradc::runtime
