// Text data read through a memory map (runtime/io/data.h, runtime/io/file_mapping.h): the batches,
// evaluation windows and tokens are those of translating the whole file at once, a byte outside
// the vocabulary is found wherever it lies, a file much larger than the batches costs the
// process the memory of its batches, and a FIFO or device is refused without blocking.
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/io/data.h"
#include "runtime/io/file_mapping.h"
#include "tests/resident_memory.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace gradc;
using namespace gradc::runtime;
using gradc::testing::residentBytes;
using gradc::testing::TempDir;

namespace {

// A sparse file of `size` zero bytes with `text` written at each of `places`.
fs::path sparseFile(const fs::path& path, std::int64_t size, const std::vector<std::pair<std::int64_t, std::string>>& places) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, size) == 0);
  for (const auto& [offset, text] : places)
    REQUIRE(::pwrite(fd, text.data(), text.size(), offset) == static_cast<ssize_t>(text.size()));
  ::close(fd);
  return path;
}

// The token ids of `text`, translated whole: what the datasets held before they were mapped.
std::vector<std::int64_t> translateWhole(const std::string& text, const Vocabulary& vocabulary) {
  std::vector<std::int64_t> ids;
  for (char c : text) ids.push_back(*vocabulary.encode(static_cast<unsigned char>(c)));
  return ids;
}

// The batch of windows `starts` cut from whole-file ids.
Batch batchFrom(const std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& starts, std::int64_t seq) {
  const auto rows = static_cast<std::int64_t>(starts.size());
  std::vector<std::int64_t> x, y;
  for (std::int64_t s : starts)
    for (std::int64_t c = 0; c < seq; ++c) {
      x.push_back(ids[s + c]);
      y.push_back(ids[s + c + 1]);
    }
  auto tensor = [&](std::vector<std::int64_t>& v) {
    return at::from_blob(v.data(), {rows, seq}, at::TensorOptions().dtype(at::kLong)).clone();
  };
  return {tensor(x), tensor(y)};
}

bool sameBatch(const Batch& a, const Batch& b) { return at::equal(a.tokens, b.tokens) && at::equal(a.targets, b.targets); }

std::string corpus() {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += static_cast<char>("the quick brown fox\n"[(i * 7 + i / 13) % 20]);
  return text;
}

}  // namespace

TEST_CASE("mapped data: batches, evaluation windows and tokens equal translating the whole file") {
  TempDir dir("mapped_batches");
  const std::string text = corpus();
  const fs::path file = dir.write("corpus.txt", text);
  for (VocabularyKind kind : {VocabularyKind::bytes, VocabularyKind::characters}) {
    Expected<TextDataset> data = TextDataset::fromFile(file, kind);
    REQUIRE(data.ok());
    const Vocabulary vocabulary = data->vocabulary();
    CHECK(vocabulary == (kind == VocabularyKind::bytes ? Vocabulary::bytes() : Vocabulary::characters(text)));
    const std::vector<std::int64_t> ids = translateWhole(text, vocabulary);
    CHECK(data->size() == static_cast<std::int64_t>(text.size()));

    for (bool random : {false, true}) {
      BatcherOptions o{.batch = 4, .seq = 33, .seed = 11, .stride = 17, .randomWindows = random};
      Expected<Batcher> batcher = Batcher::create(*data, o);
      REQUIRE(batcher.ok());
      for (int step = 0; step < 2 * batcher->batchesPerEpoch() + 3; ++step) {
        const std::vector<std::int64_t> starts = batcher->windowStarts(batcher->position());
        CHECK(sameBatch(batcher->next(), batchFrom(ids, starts, o.seq)));
      }
    }

    Expected<EvalBatches> eval = EvalBatches::create(*data, 5, 40);
    REQUIRE(eval.ok());
    std::int64_t window = 0;
    while (std::optional<Batch> b = eval->next()) {
      std::vector<std::int64_t> starts;
      for (std::int64_t r = 0; r < b->tokens.size(0); ++r) starts.push_back((window + r) * 40);
      CHECK(sameBatch(*b, batchFrom(ids, starts, 40)));
      window += b->tokens.size(0);
    }
    CHECK(window == eval->windowCount());

    Expected<at::Tensor> tokens = loadTokens(file, vocabulary);
    REQUIRE(tokens.ok());
    CHECK(std::vector<std::int64_t>(tokens->data_ptr<std::int64_t>(), tokens->data_ptr<std::int64_t>() + tokens->numel()) == ids);

    // Text in memory and the mapped file give the same batches.
    Expected<TextDataset> inMemory = TextDataset::fromText(text, vocabulary);
    REQUIRE(inMemory.ok());
    Expected<Batcher> a = Batcher::create(*data, {.batch = 3, .seq = 64, .seed = 2});
    Expected<Batcher> b = Batcher::create(*inMemory, {.batch = 3, .seq = 64, .seed = 2});
    REQUIRE((a.ok() && b.ok()));
    for (int step = 0; step < 5; ++step) CHECK(sameBatch(a->next(), b->next()));
  }
}

TEST_CASE("mapped data: a byte outside the vocabulary is named with its offset, past the first chunk too") {
  TempDir dir("mapped_unknown");
  // Zeros, an 'x' 40 MiB in (beyond the first chunk of a pass), and a 'y' near the end.
  const std::int64_t size = std::int64_t{48} << 20, at = (std::int64_t{40} << 20) + 3;
  const fs::path file = sparseFile(dir / "zeros.txt", size, {{at, "x"}, {size - 2, "y"}});
  Expected<Vocabulary> zeros = Vocabulary::parse("chars:00");
  REQUIRE(zeros.ok());
  Expected<TextDataset> data = TextDataset::fromFile(file, *zeros);
  REQUIRE(!data.ok());
  CHECK(data.error().message ==
        "data file '" + file.string() + "': byte 0x78 at offset " + std::to_string(at) + " is not in the vocabulary");

  Expected<TextDataset> chars = TextDataset::fromFile(file, VocabularyKind::characters);
  REQUIRE(chars.ok());
  CHECK(chars->vocabulary().serialize() == "chars:007879");
  std::vector<std::int64_t> tail(3);
  chars->readTokens(size - 3, tail);
  CHECK(tail == std::vector<std::int64_t>{0, 2, 0});
}

TEST_CASE("mapped data: a 1 GiB file costs the process the memory of its batches, not of the file") {
  TempDir dir("mapped_large");
  const std::int64_t size = std::int64_t{1} << 30;
  const fs::path file = sparseFile(dir / "large.txt", size, {{0, "hello"}, {size / 2, "world"}, {size - 6, "end.\n"}});
  constexpr std::int64_t kBound = std::int64_t{64} << 20;
  for (VocabularyKind kind : {VocabularyKind::bytes, VocabularyKind::characters}) {
    CAPTURE(static_cast<int>(kind));
    const std::int64_t before = residentBytes();
    {
      Expected<TextDataset> data = TextDataset::fromFile(file, kind);
      REQUIRE(data.ok());
      CHECK(data->size() == size);
      // The batcher's own state is the epoch's permutation, 8 bytes a window: 8 MiB here.
      Expected<Batcher> batcher = Batcher::create(*data, {.batch = 8, .seq = 1024, .seed = 1});
      REQUIRE(batcher.ok());
      Batch b = batcher->next();
      CHECK(b.tokens.size(0) == 8);
      const std::int64_t grown = residentBytes() - before;
      MESSAGE("resident memory grew by " << grown / 1024 << " KiB");
      CHECK(grown < kBound);
    }
  }
}

TEST_CASE("mapped data: a FIFO and a device are refused at once, never read or waited on") {
  TempDir dir("mapped_fifo");
  const fs::path fifo = dir / "in.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (const fs::path& path : {fifo, fs::path("/dev/zero")}) {
    Expected<TextDataset> data = TextDataset::fromFile(path);
    REQUIRE(!data.ok());
    CHECK(data.error().message == "cannot read data file: cannot read '" + path.string() + "': not a regular file");
    Expected<FileMapping> mapping = FileMapping::map(path);
    CHECK(!mapping.ok());
  }
}
