// The one way gradc writes a byte count for people: binary units (KiB, MiB, GiB, TiB), as the
// budgets people type (passes/budget.h) and what device tools report.
#pragma once

#include <cstdint>
#include <string>

namespace gradc::ir {

// "212.3 MiB" (one decimal; plain "512 B" below 1 KiB). For messages, logs and tables.
std::string formatBytes(std::int64_t bytes);
// "212.3 MiB (222,625,792 bytes)": the exact count next to the readable one, for what a person
// will copy into a command line (a smallest feasible budget).
std::string formatBytesExact(std::int64_t bytes);
// "222,625,792".
std::string withThousands(std::int64_t n);

}  // namespace gradc::ir
