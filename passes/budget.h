// Byte budgets as people write them: "512MiB", "2GB", "1.5GiB", "64KiB", "200000000".
//
// Units are case-insensitive. Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal
// units (kB, MB, GB, TB) are powers of 1000, as in the SI and as disk vendors use them; a bare
// number or "B" is bytes. A fraction is allowed before a unit ("1.5GiB") as long as the result
// is a whole number of bytes after rounding down. Everything else (a negative or zero budget,
// a value beyond int64, a unit gradc does not know, trailing junk) is an Error that lists the
// accepted forms.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ir/byte_format.h"
#include "ir/status.h"

namespace gradc::passes {

Expected<std::int64_t> parseBytes(std::string_view text);

// Byte counts as gradc writes them (ir/byte_format.h).
using ir::formatBytes;
using ir::formatBytesExact;

}  // namespace gradc::passes
