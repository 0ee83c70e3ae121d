// Text and token-file datasets, their vocabularies, and the batches cut from them (runtime/io/data.h).
#include "runtime/io/data.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <limits>
#include <utility>

#include "runtime/io/file_mapping.h"
#include "runtime/io/token_file.h"

namespace gradc::runtime {

namespace {

// The SplitMix64 output function: a bijective 64-bit mix.
std::uint64_t finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t combine(std::uint64_t a, std::uint64_t b) { return finalize(a ^ finalize(b + 0x9e3779b97f4a7c15ull)); }

// Distinct tags keep the shuffle and synthetic streams independent for the same seed.
constexpr std::uint64_t kShuffleTag = 0x53485546464c45ull;  // "SHUFFLE"
constexpr std::uint64_t kSyntheticTag = 0x53594e5448ull;     // "SYNTH"
constexpr std::uint64_t kRandomTag = 0x52414e444f4dull;      // "RANDOM"

Error tooSmall(const TextDataset& data, std::int64_t batch, std::int64_t seq, std::int64_t stride, std::int64_t needed) {
  std::string message = "data file '" + data.source() + "' has " + std::to_string(data.size()) +
                        " tokens; one batch of " + std::to_string(batch) + " x (" + std::to_string(seq) +
                        "+1) tokens needs " + std::to_string(needed);
  if (batch > 1) message += " (windows start every " + std::to_string(stride) + " tokens)";
  return Error{message};
}

// Validates shape options; on success `stride` holds the effective stride.
Status checkShape(std::int64_t batch, std::int64_t seq, std::int64_t& stride) {
  if (batch < 1) return Error{"batch size must be at least 1, got " + std::to_string(batch)};
  if (seq < 1) return Error{"sequence length must be at least 1, got " + std::to_string(seq)};
  if (stride == 0) stride = seq;
  if (stride < 1) return Error{"window stride must be at least 1, got " + std::to_string(stride)};
  // Bound the sizes so that every product below fits in 64 bits.
  constexpr std::int64_t kLimit = std::int64_t{1} << 31;
  if (batch > kLimit || seq > kLimit || stride > kLimit)
    return Error{"batch size, sequence length and stride must each be below 2^31"};
  return Status::success();
}

// Number of windows of seq+1 tokens starting every `stride` tokens in a stream of n tokens.
std::int64_t countWindows(std::int64_t n, std::int64_t seq, std::int64_t stride) {
  return n < seq + 1 ? 0 : (n - (seq + 1)) / stride + 1;
}

// Reads the windows starting at `starts` into a batch.
Batch makeBatch(const TextDataset& data, std::span<const std::int64_t> starts, std::int64_t seq) {
  const auto rows = static_cast<std::int64_t>(starts.size());
  Batch batch{at::empty({rows, seq}, at::TensorOptions().dtype(at::kLong)),
              at::empty({rows, seq}, at::TensorOptions().dtype(at::kLong))};
  std::int64_t* x = batch.tokens.data_ptr<std::int64_t>();
  std::int64_t* y = batch.targets.data_ptr<std::int64_t>();
  std::vector<std::int64_t> window(static_cast<std::size_t>(seq + 1));
  for (std::int64_t r = 0; r < rows; ++r) {
    data.readTokens(starts[r], window);
    std::copy(window.begin(), window.end() - 1, x + r * seq);
    std::copy(window.begin() + 1, window.end(), y + r * seq);
  }
  return batch;
}

// The offset of the first byte of `text` that `vocabulary` lacks, or -1.
std::int64_t firstUnknownByte(std::string_view text, const Vocabulary& vocabulary) {
  for (std::size_t i = 0; i < text.size(); ++i)
    if (vocabulary.tokenOf(static_cast<unsigned char>(text[i])) < 0) return static_cast<std::int64_t>(i);
  return -1;
}

Error unknownByte(const std::string& source, unsigned char byte, std::int64_t offset) {
  static constexpr char kHex[] = "0123456789abcdef";
  return Error{"data file '" + source + "': byte 0x" + kHex[byte >> 4] + kHex[byte & 15] + " at offset " +
               std::to_string(offset) + " is not in the vocabulary"};
}

// Maps a text file: not empty, and never a FIFO or device (FileMapping::map refuses them).
Expected<FileMapping> mapText(const std::filesystem::path& path) {
  Expected<FileMapping> mapping = FileMapping::map(path);
  if (!mapping) return mapping.error().withContext("cannot read data file: ");
  if (mapping->size() == 0) return Error{"data file '" + path.string() + "' is empty"};
  return mapping;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// SplitMix64

std::uint64_t SplitMix64::next() {
  state_ += 0x9e3779b97f4a7c15ull;
  return finalize(state_);
}

std::uint64_t SplitMix64::below(std::uint64_t bound) {
  assert(bound > 0);
  // Reject the lowest (2^64 mod bound) values so that every residue is equally likely.
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    std::uint64_t r = next();
    if (r >= threshold) return r % bound;
  }
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

Vocabulary::Vocabulary(std::vector<unsigned char> symbols, bool is_bytes)
    : symbols_(std::move(symbols)), is_bytes_(is_bytes) {
  index_.fill(-1);
  for (std::size_t i = 0; i < symbols_.size(); ++i) index_[symbols_[i]] = static_cast<std::int16_t>(i);
}

Vocabulary Vocabulary::bytes() {
  std::vector<unsigned char> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<unsigned char>(i);
  return Vocabulary(std::move(all), true);
}

Expected<Vocabulary> Vocabulary::tokenIds(std::int64_t n) {
  if (n < 2 || n > 65536)
    return Error{"a token file's vocabulary must have 2 to 65536 tokens (uint16 ids), got " + std::to_string(n)};
  Vocabulary v({}, false);
  v.token_ids_ = n;
  return v;
}

Vocabulary Vocabulary::characters(std::string_view text) {
  std::array<bool, 256> seen{};
  for (char c : text) seen[static_cast<unsigned char>(c)] = true;
  std::vector<unsigned char> symbols;
  for (int i = 0; i < 256; ++i)
    if (seen[i]) symbols.push_back(static_cast<unsigned char>(i));
  return Vocabulary(std::move(symbols), false);
}

std::string Vocabulary::serialize() const {
  if (is_bytes_) return "bytes";
  if (token_ids_ > 0) return "tokens:" + std::to_string(token_ids_);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "chars:";
  for (unsigned char b : symbols_) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

Expected<Vocabulary> Vocabulary::parse(std::string_view text) {
  if (text == "bytes") return bytes();
  if (text.substr(0, 7) == "tokens:") {
    std::int64_t n = 0;
    const std::string_view digits = text.substr(7);
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string_view::npos)
      return Error{"invalid vocabulary \"" + std::string(text.substr(0, 80)) + "\": expected tokens:<count>"};
    for (char d : digits) n = n * 10 + (d - '0');
    return tokenIds(n);
  }
  constexpr std::string_view kPrefix = "chars:";
  const std::string bad = "invalid vocabulary \"" + std::string(text.substr(0, 80)) + "\": ";
  if (text.substr(0, kPrefix.size()) != kPrefix)
    return Error{bad + "expected \"bytes\", \"chars:<hex>\" or \"tokens:<count>\""};
  text.remove_prefix(kPrefix.size());
  if (text.size() % 2 != 0) return Error{bad + "odd number of hex digits"};
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::vector<unsigned char> symbols;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    int hi = digit(text[i]), lo = digit(text[i + 1]);
    if (hi < 0 || lo < 0) return Error{bad + "expected lowercase hex digits"};
    auto b = static_cast<unsigned char>(hi * 16 + lo);
    if (!symbols.empty() && b <= symbols.back()) return Error{bad + "bytes must be distinct and increasing"};
    symbols.push_back(b);
  }
  if (symbols.empty()) return Error{bad + "no symbols"};
  return Vocabulary(std::move(symbols), false);
}

std::optional<std::uint8_t> Vocabulary::encode(unsigned char byte) const {
  std::int16_t token = index_[byte];
  if (token < 0) return std::nullopt;
  return static_cast<std::uint8_t>(token);
}

unsigned char Vocabulary::decode(std::int64_t token) const {
  assert(token >= 0 && token < size() && token_ids_ == 0);
  return symbols_[static_cast<std::size_t>(token)];
}

std::string Vocabulary::decode(std::span<const std::int64_t> tokens) const {
  std::string text;
  text.reserve(tokens.size());
  for (std::int64_t t : tokens) text += static_cast<char>(decode(t));
  return text;
}

// ---------------------------------------------------------------------------------------------
// TextDataset

Expected<TextDataset> TextDataset::fromText(std::string_view text, const Vocabulary& vocabulary, std::string source) {
  if (text.empty()) return Error{"data file '" + source + "' is empty"};
  if (!vocabulary.isBytes())
    if (const std::int64_t bad = firstUnknownByte(text, vocabulary); bad >= 0)
      return unknownByte(source, static_cast<unsigned char>(text[static_cast<std::size_t>(bad)]), bad);
  auto owner = std::make_shared<const std::string>(text);
  const void* data = owner->data();
  return TextDataset(std::move(owner), data, static_cast<std::int64_t>(text.size()), false, vocabulary, std::move(source));
}

TextDataset TextDataset::fromMapping(const FileMapping& mapping, const Vocabulary& vocabulary, std::string source) {
  // Batches read windows at scattered offsets: no read-ahead of the whole file.
  mapping.advise(FileMapping::Access::random);
  return TextDataset(mapping.pages(), mapping.data(), mapping.size(), false, vocabulary, std::move(source));
}

Expected<TextDataset> TextDataset::fromFile(const std::filesystem::path& path, const Vocabulary& vocabulary) {
  if (vocabulary.isTokenIds()) {
    Expected<TokenFile> file = mapTokenFile(path);
    if (!file) return file.error();
    return TextDataset(file->mapping, file->ids, file->count, true, vocabulary, path.string());
  }
  Expected<FileMapping> mapping = mapText(path);
  if (!mapping) return mapping.error();
  if (!vocabulary.isBytes()) {  // every byte is in the bytes vocabulary: nothing to read
    std::int64_t bad = -1;
    mapping->forEachChunk([&](std::string_view chunk, std::int64_t offset) {
      const std::int64_t at = firstUnknownByte(chunk, vocabulary);
      if (at >= 0) bad = offset + at;
      return at < 0;
    });
    if (bad >= 0) return unknownByte(path.string(), mapping->data()[bad], bad);
  }
  return fromMapping(*mapping, vocabulary, path.string());
}

Expected<TextDataset> TextDataset::fromFile(const std::filesystem::path& path, VocabularyKind kind) {
  Expected<FileMapping> mapping = mapText(path);
  if (!mapping) return mapping.error();
  if (kind == VocabularyKind::bytes) return fromMapping(*mapping, Vocabulary::bytes(), path.string());
  // The characters vocabulary: the distinct bytes of one pass over the file.
  std::array<bool, 256> seen{};
  mapping->forEachChunk([&seen](std::string_view chunk, std::int64_t) {
    for (char c : chunk) seen[static_cast<unsigned char>(c)] = true;
    return true;
  });
  std::string present;
  for (int b = 0; b < 256; ++b)
    if (seen[b]) present += static_cast<char>(b);
  return fromMapping(*mapping, Vocabulary::characters(present), path.string());
}

void TextDataset::readTokens(std::int64_t first, std::span<std::int64_t> out) const {
  assert(first >= 0 && first + static_cast<std::int64_t>(out.size()) <= size_);
  if (wide_) {
    const std::uint16_t* ids = static_cast<const std::uint16_t*>(data_) + first;
    std::copy(ids, ids + out.size(), out.begin());
    return;
  }
  const unsigned char* bytes = static_cast<const unsigned char*>(data_) + first;
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = vocabulary_.tokenOf(bytes[i]);
}

Expected<at::Tensor> loadTokens(const std::filesystem::path& path, const Vocabulary& vocabulary) {
  Expected<TextDataset> data = TextDataset::fromFile(path, vocabulary);
  if (!data) return data.error();
  at::Tensor t = at::empty({data->size()}, at::TensorOptions().dtype(at::kLong));
  data->readTokens(0, {t.data_ptr<std::int64_t>(), static_cast<std::size_t>(data->size())});
  return t;
}

// ---------------------------------------------------------------------------------------------
// Batcher

Expected<Batcher> Batcher::create(TextDataset data, const BatcherOptions& options) {
  BatcherOptions o = options;
  if (Status s = checkShape(o.batch, o.seq, o.stride); !s) return s.error();
  // Random windows may start at any offset (stride 1) and repeat: one window is enough.
  std::int64_t windows = countWindows(data.size(), o.seq, o.randomWindows ? 1 : o.stride);
  if (o.randomWindows ? windows < 1 : windows < o.batch)
    return tooSmall(data, o.randomWindows ? 1 : o.batch, o.seq, o.stride,
                    o.randomWindows ? o.seq + 1 : (o.batch - 1) * o.stride + o.seq + 1);
  std::int64_t vocab = data.vocabulary().size();
  return Batcher(std::move(data), vocab, o, windows);
}

Expected<Batcher> Batcher::synthetic(std::int64_t vocab, const BatcherOptions& options) {
  BatcherOptions o = options;
  if (Status s = checkShape(o.batch, o.seq, o.stride); !s) return s.error();
  if (vocab < 1) return Error{"synthetic data needs a vocabulary of at least 1 token, got " + std::to_string(vocab)};
  return Batcher(std::nullopt, vocab, o, 0);
}

namespace {
// Fisher-Yates over indices of type Index (the same draws, so the same order, for every type
// that holds n).
template <class Index>
std::vector<Index> shuffledOrder(std::uint64_t seed, std::int64_t epoch, std::int64_t n, bool shuffle) {
  std::vector<Index> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = static_cast<Index>(i);
  if (shuffle) {
    // Position i takes a uniform pick among the not yet placed [0, i].
    SplitMix64 rng(combine(combine(seed, kShuffleTag), static_cast<std::uint64_t>(epoch)));
    for (std::int64_t i = n - 1; i > 0; --i) {
      auto j = static_cast<std::size_t>(rng.below(static_cast<std::uint64_t>(i) + 1));
      std::swap(order[static_cast<std::size_t>(i)], order[j]);
    }
  }
  return order;
}
}  // namespace

std::vector<std::int64_t> epochOrder(std::uint64_t seed, std::int64_t epoch, std::int64_t n, bool shuffle) {
  return shuffledOrder<std::int64_t>(seed, epoch, n, shuffle);
}

std::int64_t Batcher::windowOfEpoch(std::int64_t epoch, std::int64_t i) const {
  if (cached_epoch_ != epoch) {
    // 4 bytes a window while the indices fit (a file of fewer than 2^32 windows), else 8.
    if (windows_ <= std::int64_t{UINT32_MAX}) {
      cached_order32_ = shuffledOrder<std::uint32_t>(options_.seed, epoch, windows_, options_.shuffle);
    } else {
      cached_order64_ = shuffledOrder<std::int64_t>(options_.seed, epoch, windows_, options_.shuffle);
    }
    cached_epoch_ = epoch;
  }
  const auto at = static_cast<std::size_t>(i);
  return windows_ <= std::int64_t{UINT32_MAX} ? static_cast<std::int64_t>(cached_order32_[at]) : cached_order64_[at];
}

std::vector<std::int64_t> Batcher::windowStarts(DataPosition position) const {
  if (isSynthetic()) return {};
  if (options_.randomWindows) {  // nanoGPT's torch.randint(len(data) - seq, (batch,))
    SplitMix64 rng(combine(combine(options_.seed, kRandomTag), static_cast<std::uint64_t>(position.index)));
    std::vector<std::int64_t> starts(static_cast<std::size_t>(options_.batch));
    for (std::int64_t& s : starts) s = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(windows_)));
    return starts;
  }
  assert(position.index >= 0 && position.index < batchesPerEpoch());
  std::vector<std::int64_t> starts(static_cast<std::size_t>(options_.batch));
  for (std::int64_t r = 0; r < options_.batch; ++r)
    starts[r] = windowOfEpoch(position.epoch, position.index * options_.batch + r) * options_.stride;
  return starts;
}

Batch Batcher::next() {
  Batch batch;
  if (isSynthetic()) {
    const std::int64_t B = options_.batch, S = options_.seq;
    batch = {at::empty({B, S}, at::TensorOptions().dtype(at::kLong)),
             at::empty({B, S}, at::TensorOptions().dtype(at::kLong))};
    std::int64_t* x = batch.tokens.data_ptr<std::int64_t>();
    std::int64_t* y = batch.targets.data_ptr<std::int64_t>();
    const std::uint64_t key = combine(combine(options_.seed, kSyntheticTag), static_cast<std::uint64_t>(position_.index));
    for (std::int64_t r = 0; r < B; ++r) {
      for (std::int64_t c = 0; c <= S; ++c) {
        const std::uint64_t h = combine(key, static_cast<std::uint64_t>(r * (S + 1) + c));
        // Multiply-shift maps the 64-bit hash onto [0, vocab).
        const auto token = static_cast<std::int64_t>((static_cast<unsigned __int128>(h) * static_cast<std::uint64_t>(vocab_)) >> 64);
        if (c < S) x[r * S + c] = token;
        if (c > 0) y[r * S + c - 1] = token;
      }
    }
    ++position_.index;
    return batch;
  }
  std::vector<std::int64_t> starts = windowStarts(position_);
  batch = makeBatch(*data_, starts, options_.seq);
  if (++position_.index == batchesPerEpoch()) {
    ++position_.epoch;
    position_.index = 0;
  }
  return batch;
}

Status Batcher::setPosition(DataPosition position) {
  if (isSynthetic() || options_.randomWindows) {
    if (position.epoch != 0 || position.index < 0)
      return Error{std::string(isSynthetic() ? "synthetic data" : "random windows'") +
                   " position must be {epoch 0, index >= 0}, got {" + std::to_string(position.epoch) +
                   ", " + std::to_string(position.index) + "}"};
  } else if (position.epoch < 0 || position.index < 0 || position.index >= batchesPerEpoch()) {
    return Error{"data position {epoch " + std::to_string(position.epoch) + ", index " + std::to_string(position.index) +
                 "} is outside the data ('" + data_->source() + "' has " + std::to_string(batchesPerEpoch()) +
                 " batches per epoch; did the data or batch shape change?)"};
  }
  position_ = position;
  return Status::success();
}

// ---------------------------------------------------------------------------------------------
// EvalBatches

Expected<EvalBatches> EvalBatches::create(TextDataset data, std::int64_t batch, std::int64_t seq, std::int64_t stride) {
  if (Status s = checkShape(batch, seq, stride); !s) return s.error();
  std::int64_t windows = countWindows(data.size(), seq, stride);
  if (windows == 0) return tooSmall(data, 1, seq, stride, seq + 1);
  return EvalBatches(std::move(data), batch, seq, stride, windows);
}

std::optional<Batch> EvalBatches::next() {
  if (next_window_ >= windows_) return std::nullopt;
  const std::int64_t rows = std::min(batch_, windows_ - next_window_);
  std::vector<std::int64_t> starts(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) starts[r] = (next_window_ + r) * stride_;
  next_window_ += rows;
  return makeBatch(data_, starts, seq_);
}

}  // namespace gradc::runtime
