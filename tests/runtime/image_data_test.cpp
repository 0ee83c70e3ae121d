// Image data read through a memory map (runtime/io/image_data.h): the batches of ImageBatcher and
// imageRange are those of converting the whole file at once (u8 scaled by 1/255 to f32, labels
// widened to i64), whatever the alignment of the tensors in the file; the file checks happen at
// load; a large file costs the process the memory of its batches.
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <fcntl.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/io/image_data.h"
#include "runtime/io/safetensors.h"
#include "tests/resident_memory.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using namespace gradc;
using namespace gradc::runtime;
using gradc::testing::residentBytes;
using gradc::testing::TempDir;

namespace {

// A tensor of a safetensors file written by hand: `bytes` first, then zeros (a hole) up to
// `length` bytes.
struct RawTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
  std::int64_t length = -1;  // -1: bytes.size()
};

std::string bytesOf(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// Writes the tensors in the given order with an unpadded header, so that a tensor may start at
// any address (the reference writer pads the header to 8 bytes; other writers need not).
fs::path writeByHand(const fs::path& path, const std::vector<RawTensor>& tensors) {
  std::string header = "{";
  std::int64_t offset = 0;
  for (const RawTensor& t : tensors) {
    const std::int64_t length = t.length < 0 ? static_cast<std::int64_t>(t.bytes.size()) : t.length;
    std::string shape;
    for (std::int64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += std::string(header.size() > 1 ? "," : "") + "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + length) + "]}";
    offset += length;
  }
  header += "}";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::string head = prefix + header;
  REQUIRE(::write(fd, head.data(), head.size()) == static_cast<ssize_t>(head.size()));
  REQUIRE(::ftruncate(fd, static_cast<off_t>(head.size() + offset)) == 0);
  std::int64_t at = static_cast<std::int64_t>(head.size());
  for (const RawTensor& t : tensors) {
    REQUIRE(::pwrite(fd, t.bytes.data(), t.bytes.size(), at) == static_cast<ssize_t>(t.bytes.size()));
    at += t.length < 0 ? static_cast<std::int64_t>(t.bytes.size()) : t.length;
  }
  ::close(fd);
  return path;
}

// The whole file converted at once: what ImageDataset held before it was mapped.
std::pair<at::Tensor, at::Tensor> convertWhole(const fs::path& path) {
  Expected<SafetensorsFile> file = loadSafetensors(path);
  REQUIRE(file.ok());
  at::Tensor x = file->tensors.at("images"), y = file->tensors.at("labels");
  if (x.scalar_type() == at::kByte) x = x.to(at::kFloat).div_(255.0);
  return {x, y.to(at::kLong)};
}

}  // namespace

TEST_CASE("image data: batches equal converting the whole file, for u8, f32 and f64 images and both label types") {
  TempDir dir("image_batches");
  const std::int64_t n = 23;
  struct Case {
    at::Tensor images;
    std::string imageDtype;
    at::Tensor labels;
    std::string labelDtype;
  };
  const std::vector<Case> cases = {
      {at::randint(0, 256, {n, 3, 4, 5}, at::kByte), "U8", at::randint(0, 10, {n}, at::kInt), "I32"},
      {at::randn({n, 2, 3, 3}, at::kFloat), "F32", at::randint(0, 10, {n}, at::kLong), "I64"},
      {at::randn({n, 1, 2, 2}, at::kDouble), "F64", at::randint(0, 10, {n}, at::kInt), "I32"},
  };
  int index = 0;
  for (const Case& c : cases) {
    CAPTURE(c.imageDtype);
    // Labels first, after an unpadded header: neither tensor is aligned in memory.
    const fs::path file = writeByHand(dir / ("images" + std::to_string(index++) + ".safetensors"),
                                      {{"labels", c.labelDtype, {n}, bytesOf(c.labels)},
                                       {"images", c.imageDtype, c.images.sizes().vec(), bytesOf(c.images)}});
    const auto [wantImages, wantLabels] = convertWhole(file);
    Expected<ImageDataset> data = ImageDataset::fromFile(file);
    REQUIRE_MESSAGE(data.ok(), (data.ok() ? "" : data.error().message));
    CHECK(data->size() == n);
    CHECK(data->imageShape() == c.images.sizes().slice(1));

    const std::int64_t batch = 4;
    Expected<ImageBatcher> batcher = ImageBatcher::create(*data, batch, 9);
    REQUIRE(batcher.ok());
    for (int step = 0; step < 2 * batcher->batchesPerEpoch() + 1; ++step) {
      const DataPosition p = batcher->position();
      std::vector<std::int64_t> order = epochOrder(9, p.epoch, n);
      at::Tensor rows = at::from_blob(order.data() + p.index * batch, {batch}, at::kLong);
      ImageBatch b = batcher->next();
      CHECK((b.images.scalar_type() == wantImages.scalar_type()));
      CHECK(at::equal(b.images, at::index_select(wantImages, 0, rows)));
      CHECK(at::equal(b.labels, at::index_select(wantLabels, 0, rows)));
    }
    ImageBatch range = imageRange(*data, 5, 7);
    CHECK(at::equal(range.images, wantImages.narrow(0, 5, 7)));
    CHECK(at::equal(range.labels, wantLabels.narrow(0, 5, 7)));
  }
}

TEST_CASE("image data: the file's tensors are checked at load") {
  TempDir dir("image_checks");
  const std::string images(2 * 3 * 4 * 4, '\1');
  const std::string labels(2 * 8, '\0');
  auto load = [&](const std::string& name, const std::vector<RawTensor>& tensors) {
    Expected<ImageDataset> data = ImageDataset::fromFile(writeByHand(dir / name, tensors));
    REQUIRE(!data.ok());
    return data.error().message;
  };
  auto where = [&](const std::string& name) { return "image data '" + (dir / name).string() + "'"; };
  CHECK(load("missing", {{"images", "U8", {2, 3, 4, 4}, images}}) ==
        where("missing") + " needs tensors `images` [N, C, H, W] and `labels` [N]; it has 1 tensors, no `labels`");
  CHECK(load("rank", {{"images", "U8", {2, 48}, images}, {"labels", "I64", {2}, labels}}) ==
        where("rank") + ": `images` must be [N, C, H, W] with N >= 1, got [2, 48]");
  CHECK(load("none", {{"images", "U8", {0, 3, 4, 4}, ""}, {"labels", "I64", {0}, ""}}) ==
        where("none") + ": `images` must be [N, C, H, W] with N >= 1, got [0, 3, 4, 4]");
  CHECK(load("dtype", {{"images", "I8", {2, 3, 4, 4}, images}, {"labels", "I64", {2}, labels}}) ==
        where("dtype") + ": `images` must be f32, f64 or u8, got Char");
  CHECK(load("count", {{"images", "U8", {2, 3, 4, 4}, images}, {"labels", "I64", {1}, labels.substr(8)}}) ==
        where("count") + ": `labels` must be [N] with N = 2 (one per image), got [1]");
  CHECK(load("labels", {{"images", "U8", {2, 3, 4, 4}, images}, {"labels", "F64", {2}, labels}}) ==
        where("labels") + ": `labels` must be i64 or i32 class indices, got Double");
  // Not a safetensors file, and not a regular file.
  Expected<ImageDataset> text = ImageDataset::fromFile(dir.write("text", "not a safetensors file"));
  REQUIRE(!text.ok());
  CHECK(text.error().message.find("safetensors file '" + (dir / "text").string() + "': header length") == 0);
  Expected<ImageDataset> device = ImageDataset::fromFile("/dev/zero");
  REQUIRE(!device.ok());
  CHECK(device.error().message == "image data: cannot read '/dev/zero': not a regular file");
}

TEST_CASE("image data: a 192 MiB u8 file costs the process the memory of its batches, not of the file") {
  TempDir dir("image_large");
  // 65536 images of [3, 32, 32] u8 (a hole of zeros), labels 0.
  const std::int64_t n = 65536, imageBytes = n * 3 * 32 * 32;
  const fs::path file = writeByHand(dir / "large.safetensors", {{"images", "U8", {n, 3, 32, 32}, "\x7f", imageBytes},
                                                                 {"labels", "I64", {n}, "", n * 8}});
  const std::int64_t before = residentBytes();
  {
    Expected<ImageDataset> data = ImageDataset::fromFile(file);
    REQUIRE(data.ok());
    std::int64_t largest = 0;  // every label read, as loadImagesFor checks them
    for (std::int64_t i = 0; i < data->size(); ++i) largest = std::max(largest, data->label(i));
    CHECK(largest == 0);
    Expected<ImageBatcher> batcher = ImageBatcher::create(*data, 128, 3);
    REQUIRE(batcher.ok());
    ImageBatch b = batcher->next();
    CHECK(b.images.sizes() == at::IntArrayRef{128, 3, 32, 32});
    CHECK((b.images.scalar_type() == at::kFloat));
    const std::int64_t grown = residentBytes() - before;
    MESSAGE("resident memory grew by " << grown / 1024 << " KiB");
    CHECK(grown < (std::int64_t{64} << 20));
    ImageBatch first = imageRange(*data, 0, 1);
    CHECK(first.images.flatten()[0].item<float>() == 127.0f / 255.0f);
  }
}
