// Token files: training data tokenised ahead of time, as nanoGPT's prepare scripts and llm.c
// write it, memory-mapped read-only (a 10 GB file costs nothing to open; pages are read as
// batches touch them).
//   nanoGPT's train.bin / val.bin: little-endian uint16 token ids, no header;
//   llm.c's .bin: a header of 256 little-endian int32 (magic 20240520, version 1, the token
//                 count), then that many uint16 token ids.
// Recognised by content: a file that starts with llm.c's header is llm.c's (its count must match
// the file's length); any other file read as tokens is nanoGPT's raw layout (an odd length is
// an error).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "ir/status.h"

namespace gradc::runtime {

inline constexpr std::int32_t kLlmcTokenMagic = 20240520;

struct TokenFile {
  std::shared_ptr<const void> mapping;  // keeps the pages mapped
  const std::uint16_t* ids = nullptr;
  std::int64_t count = 0;
  std::string format;  // "llm.c" or "nanoGPT"
};

// Maps `path`; errors name the file and what is wrong with it.
Expected<TokenFile> mapTokenFile(const std::filesystem::path& path);

// Whether `path` starts with llm.c's token header (so it holds tokens without being told).
bool hasLlmcTokenHeader(const std::filesystem::path& path);

}  // namespace gradc::runtime
