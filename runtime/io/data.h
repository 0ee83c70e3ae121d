// Training data for language models: text files as token streams, and the batches cut from them.
//
// Tokens. A file is a byte stream. The vocabulary maps bytes to token ids:
//   bytes       256 tokens, token = byte value;
//   characters  the distinct bytes of a file, sorted by value, numbered 0..V-1 (a compact
//               vocabulary for small corpora; "characters" are bytes, so UTF-8 text is split
//               into its code units).
//   token ids   a token file's ids in [0, N), from a tokenizer gradc does not run (GPT-2's BPE
//               for nanoGPT's and llm.c's .bin files, runtime/io/token_file.h); nothing to decode.
// The vocabulary serialises to a short string ("bytes", "chars:<hex of the bytes>" or
// "tokens:<N>") that a run stores in its configuration, so evaluation and resumed runs use the
// same mapping.
//
// Windows. Training samples are windows of seq+1 consecutive tokens starting every `stride`
// tokens (default stride = seq, so consecutive windows share one token and every token of the
// stream is a target exactly once; stride 1 uses every offset). tokens = window[0, seq),
// targets = window[1, seq+1): the next token at every position.
//
// Random windows (BatcherOptions::randomWindows, --sampling random): every batch draws its
// windows' starts uniformly from [0, tokens - seq), with replacement, as nanoGPT's get_batch
// does, from SplitMix64 seeded by (seed, batch index): the position {0, index} is again all the
// state there is.
//
// Order. Epoch e visits the windows in a permutation drawn by Fisher-Yates from a SplitMix64
// generator seeded by (seed, e); the generator and the bounded draw are implemented here, so the
// order is the same with every standard library and platform. Each batch takes the next
// `batch` windows of the permutation; the windows left over at the end of an epoch (fewer than a
// batch) are skipped, different ones each epoch. The position {epoch, index} (index = batches
// already drawn in the epoch) is all the state there is: a run restored to a position
// continues with exactly the same batches.
//
// Synthetic data (--synthetic) replaces the file with pseudo-random tokens in [0, vocab) that
// are a pure function of (seed, step, row, column). It has no epochs and no meaning: it exists
// for throughput and memory measurements with realistic shapes and no I/O.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/status.h"

namespace gradc::runtime {

class FileMapping;

class Vocabulary {
 public:
  // The 256-token byte vocabulary.
  static Vocabulary bytes();
  // The distinct bytes of `text`, sorted by value.
  static Vocabulary characters(std::string_view text);
  // Token ids in [0, n) of a token file (2 <= n <= 65536: the files hold uint16 ids).
  static Expected<Vocabulary> tokenIds(std::int64_t n);
  // Inverse of serialize().
  static Expected<Vocabulary> parse(std::string_view serialized);

  // "bytes", or "chars:" followed by two lowercase hex digits per byte, in token order.
  std::string serialize() const;

  std::int64_t size() const { return token_ids_ > 0 ? token_ids_ : static_cast<std::int64_t>(symbols_.size()); }
  bool isBytes() const { return is_bytes_; }
  bool isTokenIds() const { return token_ids_ > 0; }
  // The token of a byte, or nullopt when the byte is not in the vocabulary.
  std::optional<std::uint8_t> encode(unsigned char byte) const;
  // The token of a byte, or -1 when the byte is not in the vocabulary: one lookup in a
  // 256-entry table, for translating text in bulk.
  std::int64_t tokenOf(unsigned char byte) const { return index_[byte]; }
  // The byte of a token; `token` must be in [0, size()) of a byte or character vocabulary.
  unsigned char decode(std::int64_t token) const;
  std::string decode(std::span<const std::int64_t> tokens) const;

  bool operator==(const Vocabulary& other) const {
    return symbols_ == other.symbols_ && is_bytes_ == other.is_bytes_ && token_ids_ == other.token_ids_;
  }

 private:
  Vocabulary(std::vector<unsigned char> symbols, bool is_bytes);

  std::vector<unsigned char> symbols_;  // token -> byte
  std::array<std::int16_t, 256> index_{};  // byte -> token, -1 when absent
  bool is_bytes_ = false;
  std::int64_t token_ids_ = 0;  // > 0: a token-id vocabulary of this size (no symbols)
};

enum class VocabularyKind { bytes, characters };

// A file's tokens, read where they lie: a text file or a token file is memory-mapped
// (runtime/io/file_mapping.h) and never decoded whole. Text stays bytes; they become token ids
// through the vocabulary's 256-entry table only when a window is read (readTokens), so a corpus
// larger than memory trains in the memory of its batches. Opening a text file is one streaming
// pass at most: to build a characters vocabulary, or to check every byte against a given one
// (a bytes vocabulary needs neither). Copies share the storage.
class TextDataset {
 public:
  // Maps `path` and builds the vocabulary of `kind` from it.
  static Expected<TextDataset> fromFile(const std::filesystem::path& path, VocabularyKind kind = VocabularyKind::bytes);
  // Maps `path` with a given vocabulary (evaluation, resume); a byte outside it is an error.
  // A token-id vocabulary maps `path` as a token file (runtime/io/token_file.h).
  static Expected<TextDataset> fromFile(const std::filesystem::path& path, const Vocabulary& vocabulary);
  // The same for text in memory (kept in a string of its own); `source` names it in errors.
  static Expected<TextDataset> fromText(std::string_view text, const Vocabulary& vocabulary,
                                        std::string source = "<text>");

  const Vocabulary& vocabulary() const { return vocabulary_; }
  const std::string& source() const { return source_; }
  std::int64_t size() const { return size_; }
  bool isTokenFile() const { return wide_; }
  // The token ids of stream positions [first, first + out.size()), which must lie in
  // [0, size()), written to `out`.
  void readTokens(std::int64_t first, std::span<std::int64_t> out) const;

 private:
  TextDataset(std::shared_ptr<const void> owner, const void* data, std::int64_t size, bool wide, Vocabulary vocabulary,
              std::string source)
      : owner_(std::move(owner)), data_(data), size_(size), wide_(wide), vocabulary_(std::move(vocabulary)),
        source_(std::move(source)) {}
  // A mapped text file whose bytes are known to be in `vocabulary`.
  static TextDataset fromMapping(const FileMapping& mapping, const Vocabulary& vocabulary, std::string source);

  std::shared_ptr<const void> owner_;  // the storage of data_: a file mapping, or a string
  const void* data_ = nullptr;         // text bytes, or a token file's uint16 ids
  std::int64_t size_ = 0;
  bool wide_ = false;  // uint16 ids (a token file) rather than bytes
  Vocabulary vocabulary_;
  std::string source_;
};

// Where a Batcher is in its stream: `index` batches of epoch `epoch` have been drawn.
struct DataPosition {
  std::int64_t epoch = 0;
  std::int64_t index = 0;
  bool operator==(const DataPosition&) const = default;
};

struct Batch {
  at::Tensor tokens;   // i64[batch, seq]
  at::Tensor targets;  // i64[batch, seq]: tokens shifted by one position in the stream
};

struct BatcherOptions {
  std::int64_t batch = 1;
  std::int64_t seq = 1;
  std::uint64_t seed = 0;
  std::int64_t stride = 0;  // distance between window starts; 0 means seq
  bool shuffle = true;      // false: windows in stream order every epoch (debugging)
  bool randomWindows = false;  // windows at random offsets with replacement (--sampling random)
};

// The order in which epoch `epoch` visits `n` samples: a Fisher-Yates permutation drawn from
// SplitMix64 seeded by (seed, epoch) when `shuffle`, else 0 .. n-1. Shared by the text and the
// image batchers (runtime/io/image_data.h).
std::vector<std::int64_t> epochOrder(std::uint64_t seed, std::int64_t epoch, std::int64_t n, bool shuffle = true);

// Not thread-safe: one Batcher per thread (the permutation cache is shared state).
class Batcher {
 public:
  // Batches from a dataset. Fails when the options are invalid or the data cannot fill one
  // batch.
  static Expected<Batcher> create(TextDataset data, const BatcherOptions& options);
  // Synthetic batches with tokens in [0, vocab).
  static Expected<Batcher> synthetic(std::int64_t vocab, const BatcherOptions& options);

  // The batch at the current position; then advances (rolling over to the next epoch).
  Batch next();

  DataPosition position() const { return position_; }
  // Restores a saved position. Synthetic batchers accept {0, step} only.
  Status setPosition(DataPosition position);

  bool isSynthetic() const { return !data_.has_value(); }
  std::int64_t vocabSize() const { return vocab_; }
  // Number of windows in the stream and batches per epoch (0 for synthetic data).
  std::int64_t windowCount() const { return windows_; }
  // Random windows have no epochs: 0, as for synthetic data.
  std::int64_t batchesPerEpoch() const {
    return isSynthetic() || options_.randomWindows ? 0 : windows_ / options_.batch;
  }
  const BatcherOptions& options() const { return options_; }

  // The stream offset of each window of the batch at `position` (empty for synthetic data).
  std::vector<std::int64_t> windowStarts(DataPosition position) const;

 private:
  Batcher(std::optional<TextDataset> data, std::int64_t vocab, const BatcherOptions& options, std::int64_t windows)
      : data_(std::move(data)), vocab_(vocab), options_(options), windows_(windows) {}
  // Window i of epoch `epoch`'s order (the order of the last epoch asked for is kept).
  std::int64_t windowOfEpoch(std::int64_t epoch, std::int64_t i) const;

  std::optional<TextDataset> data_;
  std::int64_t vocab_ = 0;
  BatcherOptions options_;
  std::int64_t windows_ = 0;
  DataPosition position_;
  // The order of the last epoch asked for: 4 bytes a window below 2^32 windows, else 8.
  mutable std::int64_t cached_epoch_ = -1;
  mutable std::vector<std::uint32_t> cached_order32_;
  mutable std::vector<std::int64_t> cached_order64_;
};

// Every window of a dataset once, in stream order, `batch` windows at a time; the last batch may
// have fewer rows. Tokens after the last complete window are not visited (fewer than `stride`).
class EvalBatches {
 public:
  static Expected<EvalBatches> create(TextDataset data, std::int64_t batch, std::int64_t seq, std::int64_t stride = 0);

  // The next batch, or nullopt after the last one.
  std::optional<Batch> next();
  void reset() { next_window_ = 0; }
  std::int64_t windowCount() const { return windows_; }
  // Batches of all `batch` rows (a short last batch is not one).
  std::int64_t fullBatches() const { return windows_ / batch_; }
  // The next batch is full batch `index` (0-based).
  void seekBatch(std::int64_t index) { next_window_ = index * batch_; }

 private:
  EvalBatches(TextDataset data, std::int64_t batch, std::int64_t seq, std::int64_t stride, std::int64_t windows)
      : data_(std::move(data)), batch_(batch), seq_(seq), stride_(stride), windows_(windows) {}

  TextDataset data_;
  std::int64_t batch_, seq_, stride_, windows_;
  std::int64_t next_window_ = 0;
};

// All tokens of a file under `vocabulary` as i64[N] (evaluation scripts, tests).
Expected<at::Tensor> loadTokens(const std::filesystem::path& path, const Vocabulary& vocabulary);

// The SplitMix64 generator that drives shuffling, exposed for tests and other deterministic users.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, bound) without modulo bias; bound > 0.
  std::uint64_t below(std::uint64_t bound);

 private:
  std::uint64_t state_;
};

}  // namespace gradc::runtime
