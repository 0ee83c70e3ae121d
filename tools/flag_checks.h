// Range checks of numeric command-line flags, one message format for all of them:
//   --steps: must be a positive integer, got '0'
//   --momentum: must be a number in [0, 1), got '2'
// A check sees the flag's text before CLI11 converts it, so "-1" for an unsigned flag (--seed)
// and "1.5" for an integer one are refused instead of wrapped or truncated, and non-finite
// numbers ("inf", "nan") are refused everywhere. Exit code 2, as every other flag error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

namespace gradc::tools {

CLI::Validator positiveInteger();     // 1, 2, ...
CLI::Validator nonNegativeInteger();  // 0, 1, ... (up to 2^64 - 1)
CLI::Validator integerIn(std::int64_t lo, std::int64_t hi);
CLI::Validator positiveNumber();     // > 0
CLI::Validator nonNegativeNumber();  // >= 0
// [lo, hi), or [lo, hi] with closedHigh.
CLI::Validator numberIn(double lo, double hi, bool closedHigh);

// Flag errors as every other error: "gradc: error: --lr: must be a positive number, got '0'; see
// gradc train --help" (CLI11's own wording for unknown flags and missing arguments is kept).
void useErrorFormat(CLI::App& app, const std::string& program);

// The check itself, for flags parsed by hand: "" when `text` passes, else the message.
// Ok when `path` (the value of `flag`) can be written before anything runs: not a folder, in a
// folder that exists and this process may write (or an existing writable file, a device, a
// FIFO); else the message, naming the flag.
std::string checkOutputPath(const std::string& flag, const std::filesystem::path& path);

std::string checkInteger(const std::string& text, std::int64_t lo, std::int64_t hi, const std::string& range);

}  // namespace gradc::tools
