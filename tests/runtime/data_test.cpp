// Training data: tokens, vocabularies, windows, deterministic shuffling, resumable positions.
#include "runtime/io/data.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace gradc;
using namespace gradc::runtime;

namespace {

using gradc::testing::TempDir;

std::vector<std::int64_t> row(const at::Tensor& t, std::int64_t r) {
  at::Tensor x = t.select(0, r).contiguous();
  return std::vector<std::int64_t>(x.data_ptr<std::int64_t>(), x.data_ptr<std::int64_t>() + x.numel());
}

// Every token id of a dataset, in stream order.
std::vector<std::int64_t> allTokens(const TextDataset& data) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(data.size()));
  data.readTokens(0, ids);
  return ids;
}

// A deterministic text of n bytes with all 26 letters.
std::string letters(std::size_t n) {
  std::string s;
  SplitMix64 rng(1);
  while (s.size() < n) s += static_cast<char>('a' + rng.below(26));
  return s;
}

Batcher makeBatcher(const std::string& text, BatcherOptions options) {
  Expected<TextDataset> data = TextDataset::fromText(text, Vocabulary::bytes());
  REQUIRE(data.ok());
  Expected<Batcher> batcher = Batcher::create(*data, options);
  REQUIRE_MESSAGE(batcher.ok(), (batcher.ok() ? "" : batcher.error().message));
  return *batcher;
}

bool sameBatch(const Batch& a, const Batch& b) {
  return at::equal(a.tokens, b.tokens) && at::equal(a.targets, b.targets);
}

}  // namespace

TEST_CASE("data: byte tokens of a known string") {
  TempDir dir("bytes");
  const fs::path file = dir.write("hello.txt", "Hi!\n\xc3\xa9");  // "é" is two UTF-8 bytes
  Expected<TextDataset> data = TextDataset::fromFile(file);
  REQUIRE(data.ok());
  CHECK(data->vocabulary().isBytes());
  CHECK(data->vocabulary().size() == 256);
  CHECK(data->source() == file.string());
  CHECK(allTokens(*data) == std::vector<std::int64_t>{72, 105, 33, 10, 0xc3, 0xa9});

  Expected<at::Tensor> tokens = loadTokens(file, Vocabulary::bytes());
  REQUIRE(tokens.ok());
  CHECK((tokens->scalar_type() == at::kLong));
  CHECK(tokens->sizes() == at::IntArrayRef{6});
  CHECK(row(tokens->reshape({1, 6}), 0) == std::vector<std::int64_t>{72, 105, 33, 10, 0xc3, 0xa9});
}

TEST_CASE("data: targets are the tokens shifted by one position in the stream") {
  const std::string text = "abcdefghijklmnopqrstuvwxyz";
  Batcher batcher = makeBatcher(text, {.batch = 2, .seq = 4, .seed = 3});
  CHECK(batcher.windowCount() == 6);  // starts 0, 4, ..., 20: the last window is [20, 25)
  CHECK(batcher.batchesPerEpoch() == 3);
  std::set<std::int64_t> seen;
  for (int b = 0; b < 3; ++b) {
    std::vector<std::int64_t> starts = batcher.windowStarts(batcher.position());
    Batch batch = batcher.next();
    CHECK(batch.tokens.sizes() == at::IntArrayRef{2, 4});
    CHECK(batch.targets.sizes() == at::IntArrayRef{2, 4});
    CHECK((batch.tokens.scalar_type() == at::kLong));
    for (std::int64_t r = 0; r < 2; ++r) {
      const std::int64_t s = starts[r];
      CHECK(s % 4 == 0);
      seen.insert(s);
      std::vector<std::int64_t> x, y;
      for (int c = 0; c < 4; ++c) {
        x.push_back(static_cast<unsigned char>(text[s + c]));
        y.push_back(static_cast<unsigned char>(text[s + c + 1]));
      }
      CHECK(row(batch.tokens, r) == x);
      CHECK(row(batch.targets, r) == y);
    }
  }
  CHECK(seen == std::set<std::int64_t>{0, 4, 8, 12, 16, 20});  // one epoch visits every window once
  CHECK(batcher.position() == DataPosition{1, 0});
}

TEST_CASE("data: the shuffle is seeded, deterministic, and differs across seeds and epochs") {
  const std::string text = letters(4001);
  BatcherOptions options{.batch = 8, .seq = 16, .seed = 42};
  Batcher a = makeBatcher(text, options);
  Batcher b = makeBatcher(text, options);
  for (int i = 0; i < 60; ++i) CHECK(sameBatch(a.next(), b.next()));

  auto epochOrder = [&](std::uint64_t seed, std::int64_t epoch) {
    BatcherOptions o = options;
    o.seed = seed;
    Batcher batcher = makeBatcher(text, o);
    std::vector<std::int64_t> order;
    for (std::int64_t i = 0; i < batcher.batchesPerEpoch(); ++i)
      for (std::int64_t s : batcher.windowStarts({epoch, i})) order.push_back(s);
    return order;
  };
  std::vector<std::int64_t> e0 = epochOrder(42, 0);
  CHECK(e0 == epochOrder(42, 0));
  CHECK(e0 != epochOrder(43, 0));
  CHECK(e0 != epochOrder(42, 1));
  // 250 windows, 31 batches of 8: 248 distinct windows per epoch.
  CHECK(e0.size() == 248);
  CHECK(std::set<std::int64_t>(e0.begin(), e0.end()).size() == 248);

  // The order is fixed by this file's generator alone (no standard-library distribution), so it is
  // pinned: a change here changes every run's data order.
  CHECK(std::vector<std::int64_t>(e0.begin(), e0.begin() + 4) == std::vector<std::int64_t>{2656, 2896, 832, 2000});
  // The batcher keeps its order in 4-byte indices; it is the order of the 8-byte epochOrder.
  const std::vector<std::int64_t> wide = gradc::runtime::epochOrder(42, 0, 250);
  for (size_t i = 0; i < e0.size(); ++i) CHECK(e0[i] == wide[i] * 16);
  Batcher small = makeBatcher("abcdefghijklmnopqrstuvwxyz", {.batch = 1, .seq = 4, .seed = 0});
  std::vector<std::int64_t> small_order;
  for (std::int64_t i = 0; i < small.batchesPerEpoch(); ++i) small_order.push_back(small.windowStarts({0, i})[0]);
  CHECK(std::set<std::int64_t>(small_order.begin(), small_order.end()) == std::set<std::int64_t>{0, 4, 8, 12, 16, 20});

  BatcherOptions ordered = options;
  ordered.shuffle = false;
  Batcher in_order = makeBatcher(text, ordered);
  CHECK(in_order.windowStarts({0, 1}) == std::vector<std::int64_t>{128, 144, 160, 176, 192, 208, 224, 240});
}

TEST_CASE("data: SplitMix64 matches the reference sequence") {
  // The published SplitMix64 (Steele, Lea, Flood 2014) seeded with 0.
  SplitMix64 rng(0);
  CHECK(rng.next() == 0xe220a8397b1dcdafull);
  CHECK(rng.next() == 0x6e789e6aa1b965f4ull);
  CHECK(rng.next() == 0x06c45d188009454full);
  SplitMix64 bounded(5);
  for (int i = 0; i < 1000; ++i) CHECK(bounded.below(7) < 7);
}

TEST_CASE("data: a restored position continues with the same batches") {
  const std::string text = letters(1001);
  BatcherOptions options{.batch = 4, .seq = 8, .seed = 9};
  Batcher original = makeBatcher(text, options);
  const std::int64_t per_epoch = original.batchesPerEpoch();
  REQUIRE(per_epoch == 31);  // 125 windows
  for (int i = 0; i < 20; ++i) original.next();
  const DataPosition saved = original.position();
  CHECK(saved == DataPosition{0, 20});
  std::vector<Batch> expected;
  for (int i = 0; i < 30; ++i) expected.push_back(original.next());  // crosses into epoch 1

  Batcher resumed = makeBatcher(text, options);
  REQUIRE(resumed.setPosition(saved).ok());
  for (int i = 0; i < 30; ++i) {
    INFO("batch " << i);
    CHECK(sameBatch(resumed.next(), expected[i]));
  }
  CHECK(resumed.position() == original.position());
  CHECK(resumed.position() == DataPosition{1, 19});

  Status bad = resumed.setPosition({0, per_epoch});
  REQUIRE(!bad.ok());
  CHECK(bad.message().find("31 batches per epoch") != std::string::npos);
  CHECK(!resumed.setPosition({-1, 0}).ok());
}

TEST_CASE("data: epochs roll over and reshuffle") {
  Batcher batcher = makeBatcher(letters(1001), {.batch = 5, .seq = 10, .seed = 1});
  const std::int64_t per_epoch = batcher.batchesPerEpoch();
  REQUIRE(per_epoch == 20);  // 100 windows
  std::set<std::int64_t> epoch0, epoch1;
  std::vector<std::int64_t> order0, order1;
  for (std::int64_t i = 0; i < per_epoch; ++i) {
    CHECK(batcher.position() == DataPosition{0, i});
    for (std::int64_t s : batcher.windowStarts(batcher.position())) order0.push_back(s);
    batcher.next();
  }
  CHECK(batcher.position() == DataPosition{1, 0});
  for (std::int64_t i = 0; i < per_epoch; ++i) {
    for (std::int64_t s : batcher.windowStarts(batcher.position())) order1.push_back(s);
    batcher.next();
  }
  CHECK(batcher.position() == DataPosition{2, 0});
  CHECK(std::set<std::int64_t>(order0.begin(), order0.end()).size() == 100);
  CHECK(std::set<std::int64_t>(order0.begin(), order0.end()) == std::set<std::int64_t>(order1.begin(), order1.end()));
  CHECK(order0 != order1);
}

TEST_CASE("data: errors for empty, unreadable and too-small files") {
  TempDir dir("errors");
  const fs::path small = dir.write("small.txt", "0123456789");
  Expected<TextDataset> data = TextDataset::fromFile(small);
  REQUIRE(data.ok());
  Expected<Batcher> batcher = Batcher::create(*data, {.batch = 2, .seq = 8});
  REQUIRE(!batcher.ok());
  CHECK(batcher.error().message ==
        "data file '" + small.string() + "' has 10 tokens; one batch of 2 x (8+1) tokens needs 17 (windows start every 8 tokens)");
  Expected<Batcher> single = Batcher::create(*data, {.batch = 1, .seq = 10});
  REQUIRE(!single.ok());
  CHECK(single.error().message == "data file '" + small.string() + "' has 10 tokens; one batch of 1 x (10+1) tokens needs 11");
  CHECK(Batcher::create(*data, {.batch = 1, .seq = 9}).ok());  // exactly one window

  Expected<TextDataset> empty = TextDataset::fromFile(dir.write("empty.txt", ""));
  REQUIRE(!empty.ok());
  CHECK(empty.error().message.find("empty.txt' is empty") != std::string::npos);

  Expected<TextDataset> missing = TextDataset::fromFile(dir.path / "missing.txt");
  REQUIRE(!missing.ok());
  CHECK(missing.error().message.find("cannot read data file") != std::string::npos);
  CHECK(missing.error().message.find("missing.txt") != std::string::npos);
  CHECK(missing.error().message.find("No such file") != std::string::npos);

  Expected<TextDataset> folder = TextDataset::fromFile(dir.path);
  REQUIRE(!folder.ok());
  CHECK(folder.error().message.find("not a regular file") != std::string::npos);

  CHECK(!Batcher::create(*data, {.batch = 0, .seq = 4}).ok());
  CHECK(!Batcher::create(*data, {.batch = 1, .seq = 0}).ok());
  CHECK(!Batcher::create(*data, {.batch = 1, .seq = 2, .stride = -1}).ok());
}

TEST_CASE("data: character vocabulary round trip") {
  TempDir dir("chars");
  const std::string text = "hello world\n";
  const fs::path file = dir.write("corpus.txt", text);
  Expected<TextDataset> data = TextDataset::fromFile(file, VocabularyKind::characters);
  REQUIRE(data.ok());
  const Vocabulary& vocab = data->vocabulary();
  CHECK(!vocab.isBytes());
  CHECK(vocab.size() == 9);  // "\n", " ", d, e, h, l, o, r, w
  CHECK(vocab.encode('\n') == 0);
  CHECK(vocab.encode(' ') == 1);
  CHECK(vocab.encode('h') == 4);
  CHECK(vocab.encode('w') == 8);
  CHECK(!vocab.encode('x').has_value());
  CHECK(vocab.serialize() == "chars:0a206465686c6f7277");

  std::vector<std::int64_t> ids = allTokens(*data);
  CHECK(vocab.decode(ids) == text);
  for (std::int64_t id : ids) CHECK(id < vocab.size());

  // The serialised form gives back the same mapping, and reading the file with it the same tokens.
  Expected<Vocabulary> parsed = Vocabulary::parse(vocab.serialize());
  REQUIRE(parsed.ok());
  CHECK(*parsed == vocab);
  Expected<TextDataset> again = TextDataset::fromFile(file, *parsed);
  REQUIRE(again.ok());
  CHECK(allTokens(*again) == ids);
  Expected<Vocabulary> bytes = Vocabulary::parse("bytes");
  REQUIRE(bytes.ok());
  CHECK(*bytes == Vocabulary::bytes());

  // Text with a byte outside the vocabulary is an error, not a silent mapping.
  Expected<TextDataset> other = TextDataset::fromText("hello there", vocab, "eval.txt");
  REQUIRE(!other.ok());
  CHECK(other.error().message == "data file 'eval.txt': byte 0x74 at offset 6 is not in the vocabulary");

  for (const char* bad : {"", "chars", "chars:", "chars:0", "chars:zz", "chars:2020", "chars:2010", "chars:0A", "Bytes"}) {
    INFO(bad);
    CHECK(!Vocabulary::parse(bad).ok());
  }
}

TEST_CASE("data: synthetic batches are a function of (seed, step)") {
  Expected<Batcher> a = Batcher::synthetic(1000, {.batch = 3, .seq = 7, .seed = 5});
  Expected<Batcher> b = Batcher::synthetic(1000, {.batch = 3, .seq = 7, .seed = 5});
  Expected<Batcher> c = Batcher::synthetic(1000, {.batch = 3, .seq = 7, .seed = 6});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(a->isSynthetic());
  std::vector<Batch> first;
  for (int i = 0; i < 5; ++i) first.push_back(a->next());
  for (int i = 0; i < 5; ++i) CHECK(sameBatch(first[i], b->next()));
  CHECK(!sameBatch(first[0], c->next()));
  CHECK(!sameBatch(first[0], first[1]));
  CHECK(a->position() == DataPosition{0, 5});
  for (const Batch& batch : first) {
    CHECK(batch.tokens.min().item<std::int64_t>() >= 0);
    CHECK(batch.tokens.max().item<std::int64_t>() < 1000);
    // Within a row the targets are the tokens shifted by one.
    CHECK(at::equal(batch.tokens.slice(1, 1), batch.targets.slice(1, 0, 6)));
  }
  REQUIRE(b->setPosition({0, 2}).ok());
  CHECK(sameBatch(b->next(), first[2]));
  CHECK(!b->setPosition({1, 0}).ok());
  CHECK(!Batcher::synthetic(0, {.batch = 1, .seq = 1}).ok());
}

TEST_CASE("data: evaluation visits every window once, in order") {
  const std::string text = "abcdefghijklmnopqrstuvwxyz";
  Expected<TextDataset> data = TextDataset::fromText(text, Vocabulary::bytes());
  REQUIRE(data.ok());
  Expected<EvalBatches> eval = EvalBatches::create(*data, 4, 4);
  REQUIRE(eval.ok());
  CHECK(eval->windowCount() == 6);
  std::optional<Batch> b0 = eval->next();
  std::optional<Batch> b1 = eval->next();
  REQUIRE(b0.has_value());
  REQUIRE(b1.has_value());
  CHECK(!eval->next().has_value());
  CHECK(b0->tokens.size(0) == 4);
  CHECK(b1->tokens.size(0) == 2);  // the remainder
  CHECK(row(b0->tokens, 1) == std::vector<std::int64_t>{'e', 'f', 'g', 'h'});
  CHECK(row(b0->targets, 1) == std::vector<std::int64_t>{'f', 'g', 'h', 'i'});
  CHECK(row(b1->targets, 1) == std::vector<std::int64_t>{'v', 'w', 'x', 'y'});
  eval->reset();
  CHECK(at::equal(eval->next()->tokens, b0->tokens));
  CHECK(!EvalBatches::create(*data, 1, 26).ok());
}

TEST_CASE("data: a token file's ids, its vocabulary's round trip, and random windows") {
  TempDir dir("token-file");
  const std::vector<std::uint16_t> ids{7, 300, 65535, 0, 12, 9, 40000, 3, 3, 1};
  const fs::path raw = dir.path / "train.bin";
  {
    std::ofstream out(raw, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));
  }
  Expected<Vocabulary> vocab = Vocabulary::tokenIds(65536);
  REQUIRE(vocab.ok());
  CHECK(vocab->serialize() == "tokens:65536");
  Expected<Vocabulary> parsed = Vocabulary::parse("tokens:65536");
  REQUIRE(parsed.ok());
  CHECK(*parsed == *vocab);
  CHECK_FALSE(Vocabulary::parse("tokens:1").ok());
  CHECK_FALSE(Vocabulary::parse("tokens:65537").ok());
  CHECK_FALSE(Vocabulary::parse("tokens:").ok());

  Expected<TextDataset> data = TextDataset::fromFile(raw, *vocab);
  REQUIRE_MESSAGE(data.ok(), (data.ok() ? "" : data.error().message));
  CHECK(data->isTokenFile());
  CHECK(data->size() == 10);
  CHECK(allTokens(*data) == std::vector<std::int64_t>(ids.begin(), ids.end()));

  BatcherOptions o;
  o.batch = 3;
  o.seq = 4;
  o.seed = 5;
  o.randomWindows = true;
  Expected<Batcher> b = Batcher::create(*data, o);
  REQUIRE(b.ok());
  CHECK(b->batchesPerEpoch() == 0);
  Expected<Batcher> again = Batcher::create(*data, o);
  REQUIRE(again.ok());
  REQUIRE(again->setPosition({0, 2}).ok());
  b->next();
  b->next();
  std::set<std::int64_t> starts;
  for (int i = 0; i < 20; ++i) {
    for (std::int64_t s : b->windowStarts(b->position())) {
      CHECK(s >= 0);
      CHECK(s < 10 - 4);  // nanoGPT's randint(len(data) - seq)
      starts.insert(s);
    }
    const Batch x = b->next(), y = again->next();
    CHECK(sameBatch(x, y));  // a restored position draws the same windows
    CHECK(row(x.targets, 0)[0] == row(x.tokens, 0)[1]);
  }
  CHECK(starts.size() > 1);
  CHECK(b->position() == DataPosition{0, 22});
  CHECK_FALSE(b->setPosition({1, 0}).ok());
}
