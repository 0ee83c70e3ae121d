// The safetensors file format (Hugging Face), read and written without the safetensors library.
//
// Layout of a file:
//   u64 little-endian N | N bytes of UTF-8 JSON header | data buffer
// Header: {"__metadata__": {"key": "value", ...},            (optional, string -> string)
//          "<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// Offsets are relative to the start of the data buffer; tensors tile the buffer exactly (no
// gaps, no overlap, nothing after the last one); data is little-endian, row-major.
//
// Writing follows the reference implementation's layout and header order: tensors are laid out by
// descending dtype rank (U64, I64, F64, F32, U32, I32, BF16, F16, ..., BOOL) and then by name,
// so every tensor starts at an offset aligned to its element size (zero-copy readers can map
// the file); the header lists "__metadata__" first (only when non-empty, keys sorted) and then
// the tensors in buffer order, compact JSON, padded with spaces to a multiple of 8 bytes (for a
// file without metadata the bytes equal the reference writer's; it orders metadata keys by hash).
// With one dtype, the usual case for parameters, the order is simply by name. The output depends
// only on the inputs: two saves of the same map are identical bytes.
//
// Reading validates everything before allocating tensor memory, so a hostile or truncated file
// yields an Error and never more allocation than the file's own size (header capped at 100 MB,
// the reference limit).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"
#include "runtime/core/tensor_map.h"

namespace gradc::runtime {

struct SafetensorsFile {
  TensorMap tensors;  // contiguous CPU tensors that own their memory
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any device, any strides: copied to contiguous CPU first) atomically to
// `path`. Fails on undefined or sparse tensors, dtypes the format lacks, a tensor named
// "__metadata__", or names/metadata that are not valid UTF-8.
Status saveSafetensors(const std::filesystem::path& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads and validates a whole file. Errors name the file and what is wrong with it.
Expected<SafetensorsFile> loadSafetensors(const std::filesystem::path& path);

// The same from bytes in memory (`source` names them in errors); used by fuzz targets.
Expected<SafetensorsFile> parseSafetensors(std::string_view bytes, std::string_view source = "<memory>");

// Where a tensor's bytes lie in a file, as its header describes them.
struct SafetensorsEntry {
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // of its first byte, from the start of the file
  std::uint64_t nbytes = 0;
};

// The tensors of a file held in memory (a mapping, runtime/io/file_mapping.h), by name, with the
// header validated as loadSafetensors validates it but no tensor data read or copied: for
// readers that take a few rows at a time from a file larger than they want to hold (image data).
// Unlike loadSafetensors, BOOL data is not checked for bytes other than 0 and 1.
Expected<std::map<std::string, SafetensorsEntry>> indexSafetensors(std::string_view bytes,
                                                                    std::string_view source);

// Format dtype names ("F32", "BF16", "I64", "BOOL", ...) <-> ATen scalar types. nullopt where
// one side has no counterpart (for example U32, or complex types).
std::optional<std::string_view> safetensorsDtypeName(c10::ScalarType type);
std::optional<c10::ScalarType> scalarTypeFromSafetensors(std::string_view name);

// The reference implementation's limit on the header length.
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

}  // namespace gradc::runtime
