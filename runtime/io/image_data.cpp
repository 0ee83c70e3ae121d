// Image-classifier data read from a mapped safetensors file, and its batchers (runtime/io/image_data.h).
#include "runtime/io/image_data.h"

#include <ATen/ops/empty.h>

#include <cassert>
#include <cstring>
#include <map>

#include "ir/index_bounds.h"
#include "runtime/io/file_mapping.h"
#include "runtime/io/safetensors.h"

namespace gradc::runtime {

namespace {

std::string shapeText(at::IntArrayRef shape) { return ir::shapeToString(shape.vec()); }

}  // namespace

Expected<ImageDataset> ImageDataset::fromFile(const std::filesystem::path& path) {
  Expected<FileMapping> mapping = FileMapping::map(path);
  if (!mapping) return mapping.error().withContext("image data: ");
  Expected<std::map<std::string, SafetensorsEntry>> index = indexSafetensors(mapping->bytes(), path.string());
  if (!index) return index.error();
  const std::string where = "image data '" + path.string() + "'";
  auto images = index->find("images");
  auto labels = index->find("labels");
  if (images == index->end() || labels == index->end())
    return Error{where + " needs tensors `images` [N, C, H, W] and `labels` [N]; it has " +
                 std::to_string(index->size()) + " tensors" + (images == index->end() ? ", no `images`" : "") +
                 (labels == index->end() ? ", no `labels`" : "")};
  const SafetensorsEntry& x = images->second;
  const SafetensorsEntry& y = labels->second;
  if (x.shape.size() != 4 || x.shape[0] < 1)
    return Error{where + ": `images` must be [N, C, H, W] with N >= 1, got " + shapeText(x.shape)};
  if (x.dtype != at::kByte && x.dtype != at::kFloat && x.dtype != at::kDouble)
    return Error{where + ": `images` must be f32, f64 or u8, got " + std::string(c10::toString(x.dtype))};
  if (y.shape.size() != 1 || y.shape[0] != x.shape[0])
    return Error{where + ": `labels` must be [N] with N = " + std::to_string(x.shape[0]) + " (one per image), got " +
                 shapeText(y.shape)};
  if (y.dtype != at::kLong && y.dtype != at::kInt)
    return Error{where + ": `labels` must be i64 or i32 class indices, got " + std::string(c10::toString(y.dtype))};
  // Batches read images at scattered offsets: no read-ahead of the whole file.
  mapping->advise(FileMapping::Access::random);
  return ImageDataset(mapping->pages(), mapping->data() + x.offset, x.dtype, x.shape, mapping->data() + y.offset,
                      y.dtype, path.string());
}

std::int64_t ImageDataset::label(std::int64_t index) const {
  // memcpy: the labels need not be aligned (see gather).
  if (labelType_ == at::kLong) {
    std::int64_t value = 0;
    std::memcpy(&value, labels_ + index * sizeof value, sizeof value);
    return value;
  }
  std::int32_t value = 0;
  std::memcpy(&value, labels_ + index * sizeof value, sizeof value);
  return value;
}

ImageBatch ImageDataset::gather(std::span<const std::int64_t> rows) const {
  const auto n = static_cast<std::int64_t>(rows.size());
  std::vector<std::int64_t> batchShape = shape_;
  batchShape[0] = n;
  const bool scaled = imageType_ == at::kByte;
  at::Tensor images = at::empty(batchShape, at::TensorOptions().dtype(scaled ? at::kFloat : imageType_));
  at::Tensor labels = at::empty({n}, at::TensorOptions().dtype(at::kLong));
  const std::int64_t perImage = shape_[1] * shape_[2] * shape_[3];
  const std::size_t imageBytes = c10::elementSize(imageType_) * static_cast<std::size_t>(perImage);
  std::int64_t* outLabels = labels.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < n; ++r) {
    assert(rows[r] >= 0 && rows[r] < size());
    const unsigned char* source = images_ + rows[r] * imageBytes;
    if (scaled) {
      // x / 255 in f32, correctly rounded: the values of converting the whole file with ATen,
      // without an ATen u8 copy of the batch beside the result.
      float* out = images.data_ptr<float>() + r * perImage;
      for (std::int64_t i = 0; i < perImage; ++i) out[i] = static_cast<float>(source[i]) / 255.0f;
    } else {
      // memcpy: the file aligns tensors only relative to its data buffer, which may start anywhere.
      std::memcpy(static_cast<unsigned char*>(images.data_ptr()) + r * imageBytes, source, imageBytes);
    }
    outLabels[r] = label(rows[r]);
  }
  return {std::move(images), std::move(labels)};
}

std::optional<ImageInputs> imageInputs(const ir::Graph& graph) {
  const ir::Value* images = graph.findNamed("images");
  const ir::Value* labels = graph.findNamed("labels");
  if (!images || !labels || images->kind() != ir::ValueKind::Input || labels->kind() != ir::ValueKind::Input)
    return std::nullopt;
  const ir::TensorType& x = images->type();
  const ir::TensorType& y = labels->type();
  if (x.rank() != 4 || !ir::isFloating(x.dtype) || y.rank() != 1 || !ir::isInteger(y.dtype) || y.shape[0] != x.shape[0])
    return std::nullopt;
  return ImageInputs{images, labels};
}

Expected<ImageDataset> loadImagesFor(const std::filesystem::path& path, const ImageInputs& inputs) {
  Expected<ImageDataset> data = ImageDataset::fromFile(path);
  if (!data) return data;
  const at::IntArrayRef imageShape = at::IntArrayRef(inputs.images->type().shape).slice(1);
  if (data->imageShape() != imageShape)
    return Error{"image data '" + data->source() + "' holds images of " + shapeText(data->imageShape()) +
                 ", but the model's `images` input takes " + shapeText(imageShape) + " (--set the model's dims)"};
  // One pass over the labels (8 bytes an image at most); the images stay unread.
  const std::optional<ir::IndexBound> bound = ir::indexBound(*inputs.labels);
  for (std::int64_t i = 0; i < data->size(); ++i) {
    const std::int64_t l = data->label(i);
    if (l < 0 || (bound && l >= bound->bound))
      return Error{"image data '" + data->source() + "': label " + std::to_string(l) + " of image " +
                   std::to_string(i) + " is not a class in [0, " +
                   (bound ? std::to_string(bound->bound) : std::string("...")) + ")"};
  }
  return data;
}

Expected<ImageBatcher> ImageBatcher::create(ImageDataset data, std::int64_t batch, std::uint64_t seed) {
  if (batch < 1) return Error{"batch size must be at least 1, got " + std::to_string(batch)};
  if (data.size() < batch)
    return Error{"image data '" + data.source() + "' has " + std::to_string(data.size()) +
                 " images; one batch needs " + std::to_string(batch)};
  return ImageBatcher(std::move(data), batch, seed);
}

ImageBatch ImageBatcher::next() {
  if (cachedEpoch_ != position_.epoch) {
    order_ = epochOrder(seed_, position_.epoch, data_.size());
    cachedEpoch_ = position_.epoch;
  }
  ImageBatch b = data_.gather(std::span<const std::int64_t>(order_).subspan(position_.index * batch_, batch_));
  if (++position_.index >= batchesPerEpoch()) position_ = {position_.epoch + 1, 0};
  return b;
}

Status ImageBatcher::setPosition(DataPosition position) {
  if (position.epoch < 0 || position.index < 0 || position.index >= batchesPerEpoch())
    return Error{"data position (epoch " + std::to_string(position.epoch) + ", batch " + std::to_string(position.index) +
                 ") is outside '" + data_.source() + "', which has " + std::to_string(batchesPerEpoch()) +
                 " batches per epoch"};
  position_ = position;
  return {};
}

ImageBatch imageRange(const ImageDataset& data, std::int64_t first, std::int64_t count) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) rows[i] = first + i;
  return data.gather(rows);
}

}  // namespace gradc::runtime
