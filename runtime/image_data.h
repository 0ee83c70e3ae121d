// Training and evaluation data for image classifiers: a safetensors file holding `images`
// [N, C, H, W] (f32, f64, or u8 scaled to [0, 1] by 1/255) and `labels` [N] (i64 or i32 class
// indices), the inputs of the same names of models/resnet*.yaml.
//
// Order: epoch e visits the images in epochOrder(seed, e, N) (runtime/data.h, the text
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
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "runtime/data.h"

namespace gradc::runtime {

class ImageDataset {
 public:
  // Reads and checks the file: both tensors present, N > 0 images, as many labels as images.
  static Expected<ImageDataset> fromFile(const std::filesystem::path& path);

  std::int64_t size() const { return images_.size(0); }
  const at::Tensor& images() const { return images_; }  // f32 or f64 [N, C, H, W]
  const at::Tensor& labels() const { return labels_; }  // i64 [N]
  const std::string& source() const { return source_; }


 private:
  ImageDataset(std::shared_ptr<std::vector<std::byte>> storage, at::Tensor images, at::Tensor labels, std::string source)
      : storage_(std::move(storage)), images_(std::move(images)), labels_(std::move(labels)), source_(std::move(source)) {}
  std::shared_ptr<std::vector<std::byte>> storage_;  // what images_ and labels_ view
  at::Tensor images_, labels_;
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

struct ImageBatch {
  at::Tensor images;  // [batch, C, H, W]
  at::Tensor labels;  // i64[batch]
};

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
