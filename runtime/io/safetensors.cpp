#include "runtime/io/safetensors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "runtime/io/atomic_file.h"

namespace gradc::runtime {

// Tensor bytes are written and read as they lie in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// `rank` is the position in the reference implementation's Dtype enum ("increasing alignment
// order"); writers lay tensors out by descending rank.
struct DtypeInfo {
  std::string_view name;
  int rank;
  std::size_t size;
  c10::ScalarType type;  // Undefined: the format has it, this LibTorch does not
};

constexpr std::array<DtypeInfo, 15> kDtypes = {{
    {"BOOL", 0, 1, c10::ScalarType::Bool},
    {"U8", 1, 1, c10::ScalarType::Byte},
    {"I8", 2, 1, c10::ScalarType::Char},
    {"F8_E5M2", 3, 1, c10::ScalarType::Undefined},
    {"F8_E4M3", 4, 1, c10::ScalarType::Undefined},
    {"I16", 5, 2, c10::ScalarType::Short},
    {"U16", 6, 2, c10::ScalarType::Undefined},
    {"F16", 7, 2, c10::ScalarType::Half},
    {"BF16", 8, 2, c10::ScalarType::BFloat16},
    {"I32", 9, 4, c10::ScalarType::Int},
    {"U32", 10, 4, c10::ScalarType::Undefined},
    {"F32", 11, 4, c10::ScalarType::Float},
    {"F64", 12, 8, c10::ScalarType::Double},
    {"I64", 13, 8, c10::ScalarType::Long},
    {"U64", 14, 8, c10::ScalarType::Undefined},
}};

// Names newer revisions of the format define and this reader does not size; reported as
// unsupported rather than unknown.
constexpr std::array<std::string_view, 5> kOtherKnownDtypes = {"F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"};

const DtypeInfo* findDtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

const DtypeInfo* findDtype(c10::ScalarType type) {
  for (const DtypeInfo& d : kDtypes)
    if (d.type == type && type != c10::ScalarType::Undefined) return &d;
  return nullptr;
}

constexpr std::size_t kMaxDims = 64;

std::string shapeString(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// ---------------------------------------------------------------------------------------------
// Header parsing

struct Entry {
  std::string name;
  const DtypeInfo* dtype = nullptr;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

// Thrown from the parser callback, caught in parseJson: the format's structure is shallow
// (object -> entry object -> shape array), so deeper nesting and duplicate keys are rejected
// while parsing, before a hostile header can build a large tree.
struct StructureError {
  std::string message;
};

Expected<json> parseJson(std::string_view text) {
  if (text.empty() || text.front() != '{') return Error{"header is not a JSON object"};
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto callback = [&keys](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= 3) throw StructureError{"header nests deeper than the format allows"};
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys.back().insert(key).second) throw StructureError{"duplicate key \"" + key + "\" in header"};
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const StructureError& e) {
    return Error{e.message};
  } catch (const json::exception& e) {
    // nlohmann's messages carry the byte position: "[json.exception.parse_error.101] ...".
    return Error{std::string("header is not valid JSON: ") + e.what()};
  }
}

Expected<std::uint64_t> unsignedValue(const json& v) {
  if (!v.is_number_unsigned()) return Error{""};
  return v.get<std::uint64_t>();
}

Expected<Entry> parseEntry(const std::string& name, const json& value) {
  const std::string where = "tensor '" + name + "'";
  if (!value.is_object()) return Error{where + ": entry is not a JSON object"};
  for (const auto& [key, unused] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return Error{where + ": unknown field \"" + key + "\""};
  Entry entry;
  entry.name = name;

  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) return Error{where + ": missing string field \"dtype\""};
  const std::string& dtype_name = dtype->get_ref<const std::string&>();
  entry.dtype = findDtype(dtype_name);
  bool other_known = std::find(kOtherKnownDtypes.begin(), kOtherKnownDtypes.end(), dtype_name) !=
                     kOtherKnownDtypes.end();
  if (!entry.dtype && !other_known) return Error{where + ": unknown dtype \"" + dtype_name + "\""};
  if (!entry.dtype || entry.dtype->type == c10::ScalarType::Undefined)
    return Error{where + ": dtype \"" + dtype_name + "\" is not supported by this LibTorch"};

  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) return Error{where + ": missing list field \"shape\""};
  if (shape->size() > kMaxDims) return Error{where + ": shape has more than " + std::to_string(kMaxDims) + " dimensions"};
  std::uint64_t numel = 1;
  bool overflow = false;
  for (const json& dim : *shape) {
    Expected<std::uint64_t> d = unsignedValue(dim);
    if (!d || *d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return Error{where + ": shape must be a list of non-negative integers, got " + shape->dump()};
    entry.shape.push_back(static_cast<std::int64_t>(*d));
    overflow = overflow || __builtin_mul_overflow(numel, *d, &numel);
  }
  std::uint64_t nbytes = 0;
  if (overflow || __builtin_mul_overflow(numel, entry.dtype->size, &nbytes))
    return Error{where + ": shape " + shapeString(entry.shape) + " overflows a 64-bit byte count"};

  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2)
    return Error{where + ": missing field \"data_offsets\" of two integers"};
  Expected<std::uint64_t> begin = unsignedValue((*offsets)[0]);
  Expected<std::uint64_t> end = unsignedValue((*offsets)[1]);
  if (!begin || !end) return Error{where + ": data_offsets must be two non-negative integers, got " + offsets->dump()};
  entry.begin = *begin;
  entry.end = *end;
  if (entry.end < entry.begin) return Error{where + ": data_offsets " + offsets->dump() + " end before they begin"};
  if (entry.end - entry.begin != nbytes)
    return Error{where + ": dtype " + dtype_name + " and shape " + shapeString(entry.shape) + " need " +
                 std::to_string(nbytes) + " bytes but data_offsets " + offsets->dump() + " span " +
                 std::to_string(entry.end - entry.begin)};
  return entry;
}

// Parses the header text and checks the entries against a data buffer of `buffer_size` bytes.
Expected<Header> parseHeader(std::string_view text, std::uint64_t buffer_size) {
  Expected<json> root = parseJson(text);
  if (!root) return root.error();
  if (!root->is_object()) return Error{"header is not a JSON object"};

  Header header;
  for (const auto& [name, value] : root->items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return Error{"\"__metadata__\" is not a JSON object"};
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) return Error{"\"__metadata__\" value of \"" + key + "\" is not a string"};
        header.metadata.emplace(key, v.get<std::string>());
      }
      continue;
    }
    Expected<Entry> entry = parseEntry(name, value);
    if (!entry) return entry.error();
    if (entry->end > buffer_size)
      return Error{"tensor '" + name + "': data_offsets [" + std::to_string(entry->begin) + ", " +
                   std::to_string(entry->end) + "] lie outside the " + std::to_string(buffer_size) +
                   "-byte data buffer"};
    header.entries.push_back(std::move(*entry));
  }

  // The tensors must tile the buffer exactly, in some order: sort by offsets and walk.
  std::vector<const Entry*> order;
  for (const Entry& e : header.entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  std::uint64_t cursor = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : order) {
    if (e->begin < cursor)
      return Error{"tensor '" + e->name + "' overlaps tensor '" + previous->name + "' (data_offsets start at " +
                   std::to_string(e->begin) + ", previous tensor ends at " + std::to_string(cursor) + ")"};
    if (e->begin > cursor)
      return Error{"gap of " + std::to_string(e->begin - cursor) + " bytes before tensor '" + e->name +
                   "' (tensors must be laid out contiguously)"};
    cursor = e->end;
    if (e->end > e->begin) previous = e;
  }
  if (cursor != buffer_size)
    return Error{std::to_string(buffer_size - cursor) + " bytes of trailing data after the last tensor"};
  return header;
}

// ---------------------------------------------------------------------------------------------
// Decoding from any byte source

using ReadAt = std::function<Status(std::uint64_t offset, void* dst, std::size_t size)>;

// A validated header and where the data buffer starts in the file.
struct Layout {
  Header header;
  std::uint64_t data_start = 0;
};

Expected<Layout> readLayout(std::string_view source, std::uint64_t file_size, const ReadAt& read) {
  const std::string prefix = "safetensors file '" + std::string(source) + "': ";
  auto fail = [&prefix](const std::string& message) { return Error{prefix + message}; };

  if (file_size < 8)
    return fail("too short (" + std::to_string(file_size) + " bytes) to hold the 8-byte header length");
  std::array<unsigned char, 8> length_bytes{};
  if (Status s = read(0, length_bytes.data(), 8); !s) return s.error();
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | length_bytes[i];
  if (n > kSafetensorsMaxHeaderBytes)
    return fail("header length " + std::to_string(n) + " exceeds the limit of " +
                std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  if (n > file_size - 8)
    return fail("header length " + std::to_string(n) + " exceeds the " + std::to_string(file_size - 8) +
                " bytes that follow it");

  std::string text(n, '\0');
  if (Status s = read(8, text.data(), n); !s) return s.error();
  const std::uint64_t data_start = 8 + n;
  Expected<Header> header = parseHeader(text, file_size - data_start);
  if (!header) return fail(header.error().message);
  return Layout{std::move(*header), data_start};
}

Expected<SafetensorsFile> decode(std::string_view source, std::uint64_t file_size, const ReadAt& read) {
  const std::string prefix = "safetensors file '" + std::string(source) + "': ";
  auto fail = [&prefix](const std::string& message) { return Error{prefix + message}; };
  Expected<Layout> layout = readLayout(source, file_size, read);
  if (!layout) return layout.error();
  const std::uint64_t data_start = layout->data_start;

  SafetensorsFile file;
  file.metadata = std::move(layout->header.metadata);
  for (Entry& e : layout->header.entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype->type));
    const std::size_t nbytes = e.end - e.begin;
    if (nbytes > 0) {
      if (Status s = read(data_start + e.begin, t.data_ptr(), nbytes); !s) return s.error();
    }
    if (e.dtype->type == c10::ScalarType::Bool) {
      const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
      if (nbytes > 0 && std::any_of(bytes, bytes + nbytes, [](unsigned char b) { return b > 1; }))
        return fail("tensor '" + e.name + "': BOOL data holds bytes other than 0 and 1");
    }
    file.tensors.emplace(std::move(e.name), std::move(t));
  }
  return file;
}

// Owns a file descriptor for the duration of a load.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::optional<std::string_view> safetensorsDtypeName(c10::ScalarType type) {
  if (const DtypeInfo* d = findDtype(type)) return d->name;
  return std::nullopt;
}

std::optional<c10::ScalarType> scalarTypeFromSafetensors(std::string_view name) {
  const DtypeInfo* d = findDtype(name);
  if (!d || d->type == c10::ScalarType::Undefined) return std::nullopt;
  return d->type;
}

Status saveSafetensors(const std::filesystem::path& path, const TensorMap& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string prefix = "cannot save safetensors file '" + path.string() + "': ";
  struct Item {
    const std::string* name;
    const DtypeInfo* dtype;
    const at::Tensor* tensor;
    std::uint64_t nbytes;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") return Error{prefix + "\"__metadata__\" is reserved and cannot name a tensor"};
    if (!t.defined()) return Error{prefix + "tensor '" + name + "' is undefined"};
    if (t.layout() != c10::kStrided) return Error{prefix + "tensor '" + name + "' is not a dense (strided) tensor"};
    const DtypeInfo* dtype = findDtype(t.scalar_type());
    if (!dtype)
      return Error{prefix + "tensor '" + name + "' has dtype " + std::string(c10::toString(t.scalar_type())) +
                   ", which the format cannot store"};
    items.push_back({&name, dtype, &t, static_cast<std::uint64_t>(t.numel()) * dtype->size});
  }
  // `tensors` iterates by name; a stable sort by descending rank keeps names ordered within a rank.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.dtype->rank > b.dtype->rank; });

  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json meta = ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  std::uint64_t offset = 0;
  for (const Item& item : items) {
    ordered_json entry = ordered_json::object();
    entry["dtype"] = item.dtype->name;
    entry["shape"] = item.tensor->sizes().vec();
    entry["data_offsets"] = {offset, offset + item.nbytes};
    header[*item.name] = std::move(entry);
    offset += item.nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const ordered_json::exception&) {
    return Error{prefix + "a tensor name or metadata string is not valid UTF-8"};
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  Expected<AtomicFileWriter> writer = AtomicFileWriter::open(path);
  if (!writer) return writer.error();
  std::array<unsigned char, 8> length_bytes{};
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  if (Status s = writer->write(length_bytes.data(), 8); !s) return s;
  if (Status s = writer->write(text); !s) return s;
  for (const Item& item : items) {
    if (item.nbytes == 0) continue;
    // One tensor at a time, so a model on a GPU never needs a second full copy in host memory.
    at::Tensor cpu = item.tensor->detach();
    if (!cpu.is_cpu()) cpu = cpu.cpu();
    cpu = cpu.resolve_neg().contiguous();
    if (Status s = writer->write(cpu.data_ptr(), item.nbytes); !s) return s;
  }
  return writer->commit();
}

Expected<SafetensorsFile> loadSafetensors(const std::filesystem::path& path) {
  // O_NONBLOCK: a FIFO is refused below instead of waiting for a writer.
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) return ioError("cannot open safetensors file", path, errno);
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) return ioError("cannot stat safetensors file", path, errno);
  if (!S_ISREG(info.st_mode)) return Error{"safetensors file '" + path.string() + "': not a regular file"};

  ReadAt read = [&](std::uint64_t offset, void* dst, std::size_t size) -> Status {
    auto* p = static_cast<char*>(dst);
    while (size > 0) {
      ssize_t got = ::pread(file.fd, p, size, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return ioError("cannot read safetensors file", path, errno);
      if (got == 0) return Error{"safetensors file '" + path.string() + "': ends early (was it truncated while reading?)"};
      p += got;
      offset += static_cast<std::uint64_t>(got);
      size -= static_cast<std::size_t>(got);
    }
    return Status::success();
  };
  return decode(path.string(), static_cast<std::uint64_t>(info.st_size), read);
}

namespace {

// Reads from bytes in memory; decode() and readLayout() only read ranges they have checked
// against the size.
ReadAt readFromMemory(std::string_view bytes) {
  return [bytes](std::uint64_t offset, void* dst, std::size_t size) -> Status {
    assert(offset <= bytes.size() && size <= bytes.size() - offset);
    std::memcpy(dst, bytes.data() + offset, size);
    return Status::success();
  };
}

}  // namespace

Expected<SafetensorsFile> parseSafetensors(std::string_view bytes, std::string_view source) {
  return decode(source, bytes.size(), readFromMemory(bytes));
}

Expected<std::map<std::string, SafetensorsEntry>> indexSafetensors(std::string_view bytes, std::string_view source) {
  Expected<Layout> layout = readLayout(source, bytes.size(), readFromMemory(bytes));
  if (!layout) return layout.error();
  std::map<std::string, SafetensorsEntry> index;
  for (const Entry& e : layout->header.entries)
    index.emplace(e.name, SafetensorsEntry{e.dtype->type, e.shape, layout->data_start + e.begin, e.end - e.begin});
  return index;
}

}  // namespace gradc::runtime
