// Training and evaluation data for image classifiers: a safetensors file holding `images`
// [N, C, H, W] (f32, f64, or u8 scaled to [0, 1] by 1/255) and `labels` [N] (i64 or i32 class
// indices), the inputs of the same names of models/resnet*.yaml. The file is mapped, never
// decoded whole: a batch's images are converted when the batch is cut.
//
// Order: epoch e visits the images in epochOrder(seed, e, N) (runtime/io/data.h, the text
// batcher's permutation); each batch takes the next `batch` of them and the remainder of an
// epoch (fewer than a batch) is skipped, as the text batcher does. The position {epoch, index}
// is all the state there is, saved in checkpoints: a resumed run draws the same batches.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/io/data.h"

namespace gradc::runtime {

struct ImageBatch {
  at::Tensor images;  // [batch, C, H, W], f32 (u8 files, scaled) or the file's f32 / f64
  at::Tensor labels;  // i64[batch]
};

// The file is memory-mapped (runtime/io/file_mapping.h) and read where it lies: loading checks the
// header and nothing else is read or copied until a batch is cut, when that batch's images are
// copied out and converted (u8 to f32 by x / 255, the same values as converting the whole file
// would give) and its labels widened to i64. The batch is then converted to the graph input's
// dtype by the caller. Copies share the mapping.
class ImageDataset {
 public:
  // Maps and checks the file: both tensors present, `images` [N, C, H, W] of f32, f64 or u8 with
  // N > 0, `labels` [N] of i64 or i32.
  static Expected<ImageDataset> fromFile(const std::filesystem::path& path);

  std::int64_t size() const { return shape_[0]; }
  // [C, H, W] of every image.
  at::IntArrayRef imageShape() const { return at::IntArrayRef(shape_).slice(1); }
  // The label of image `index` in [0, size()).
  std::int64_t label(std::int64_t index) const;
  // Images `rows` (each in [0, size())), in that order, as one batch.
  ImageBatch gather(std::span<const std::int64_t> rows) const;
  const std::string& source() const { return source_; }

 private:
  ImageDataset(std::shared_ptr<const void> pages, const unsigned char* images, at::ScalarType imageType,
               std::vector<std::int64_t> shape, const unsigned char* labels, at::ScalarType labelType, std::string source)
      : pages_(std::move(pages)), images_(images), imageType_(imageType), shape_(std::move(shape)), labels_(labels),
        labelType_(labelType), source_(std::move(source)) {}
  std::shared_ptr<const void> pages_;  // the mapping that images_ and labels_ point into
  const unsigned char* images_;        // N images of shape_[1:] in imageType_, row-major
  at::ScalarType imageType_;           // u8, f32 or f64
  std::vector<std::int64_t> shape_;    // [N, C, H, W]
  const unsigned char* labels_;        // N labels of labelType_ (not necessarily aligned)
  at::ScalarType labelType_;           // i64 or i32
  std::string source_;
};

// A graph's image-classifier inputs: `images` [batch, C, H, W] (floating point) and `labels`
// [batch] (integer class indices).
struct ImageInputs {
  const ir::Value* images;
  const ir::Value* labels;
};
// nullopt when the graph has no such pair.
std::optional<ImageInputs> imageInputs(const ir::Graph& graph);

// Reads `path` (ImageDataset::fromFile) and checks it against the graph's inputs: each image
// of the input's [C, H, W], every label in [0, classes) of the op that reads `labels`
// (ir::indexBound).
Expected<ImageDataset> loadImagesFor(const std::filesystem::path& path, const ImageInputs& inputs);

class ImageBatcher {
 public:
  static Expected<ImageBatcher> create(ImageDataset data, std::int64_t batch, std::uint64_t seed);

  // The batch at the current position; then advances (rolling over to the next epoch).
  ImageBatch next();
  DataPosition position() const { return position_; }
  Status setPosition(DataPosition position);
  std::int64_t batchesPerEpoch() const { return data_.size() / batch_; }

 private:
  ImageBatcher(ImageDataset data, std::int64_t batch, std::uint64_t seed)
      : data_(std::move(data)), batch_(batch), seed_(seed) {}
  ImageDataset data_;
  std::int64_t batch_;
  std::uint64_t seed_;
  DataPosition position_;
  std::int64_t cachedEpoch_ = -1;
  std::vector<std::int64_t> order_;
};

// Every image once, in file order, `batch` at a time (evaluation); the last batch may be short.
ImageBatch imageRange(const ImageDataset& data, std::int64_t first, std::int64_t count);

}  // namespace gradc::runtime
