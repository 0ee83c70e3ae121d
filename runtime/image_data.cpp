#include "runtime/image_data.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>

#include <cstring>

#include "ir/index_bounds.h"
#include "runtime/safetensors.h"

namespace gradc::runtime {

namespace {

std::string shapeText(at::IntArrayRef shape) { return ir::shapeToString(shape.vec()); }

}  // namespace

Expected<ImageDataset> ImageDataset::fromFile(const std::filesystem::path& path) {
  Expected<SafetensorsFile> file = loadSafetensors(path);
  if (!file) return Error{file.error().message};
  const std::string where = "image data '" + path.string() + "'";
  auto images = file->tensors.find("images");
  auto labels = file->tensors.find("labels");
  if (images == file->tensors.end() || labels == file->tensors.end())
    return Error{where + " needs tensors `images` [N, C, H, W] and `labels` [N]; it has " +
                 std::to_string(file->tensors.size()) + " tensors" + (images == file->tensors.end() ? ", no `images`" : "") +
                 (labels == file->tensors.end() ? ", no `labels`" : "")};
  at::Tensor x = images->second, y = labels->second;
  if (x.dim() != 4 || x.size(0) < 1)
    return Error{where + ": `images` must be [N, C, H, W] with N >= 1, got " + shapeText(x.sizes())};
  if (x.scalar_type() == at::kByte) x = x.to(at::kFloat).div_(255.0);
  else if (x.scalar_type() != at::kFloat && x.scalar_type() != at::kDouble)
    return Error{where + ": `images` must be f32, f64 or u8, got " + std::string(c10::toString(x.scalar_type()))};
  if (y.dim() != 1 || y.size(0) != x.size(0))
    return Error{where + ": `labels` must be [N] with N = " + std::to_string(x.size(0)) + " (one per image), got " +
                 shapeText(y.sizes())};
  if (y.scalar_type() != at::kLong && y.scalar_type() != at::kInt)
    return Error{where + ": `labels` must be i64 or i32 class indices, got " + std::string(c10::toString(y.scalar_type()))};
  x = x.contiguous();
  y = y.to(at::kLong).contiguous();
  // One untracked buffer: the images, then (8-byte aligned) the labels.
  const std::size_t imageBytes = (x.nbytes() + 7) / 8 * 8;
  auto storage = std::make_shared<std::vector<std::byte>>(imageBytes + y.nbytes());
  std::memcpy(storage->data(), x.data_ptr(), x.nbytes());
  std::memcpy(storage->data() + imageBytes, y.data_ptr(), y.nbytes());
  at::Tensor imageView = at::from_blob(storage->data(), x.sizes(), at::TensorOptions().dtype(x.scalar_type()));
  at::Tensor labelView = at::from_blob(storage->data() + imageBytes, y.sizes(), at::TensorOptions().dtype(at::kLong));
  return ImageDataset(std::move(storage), imageView, labelView, path.string());
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
  if (data->images().sizes().slice(1) != imageShape)
    return Error{"image data '" + data->source() + "' holds images of " + shapeText(data->images().sizes().slice(1)) +
                 ", but the model's `images` input takes " + shapeText(imageShape) + " (--set the model's dims)"};
  const std::optional<ir::IndexBound> bound = ir::indexBound(*inputs.labels);
  const std::int64_t* l = data->labels().data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < data->labels().numel(); ++i)
    if (l[i] < 0 || (bound && l[i] >= bound->bound))
      return Error{"image data '" + data->source() + "': label " + std::to_string(l[i]) + " of image " +
                   std::to_string(i) + " is not a class in [0, " +
                   (bound ? std::to_string(bound->bound) : std::string("...")) + ")"};
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
  at::Tensor rows = at::from_blob(order_.data() + position_.index * batch_, {batch_}, at::kLong);
  ImageBatch b{at::index_select(data_.images(), 0, rows), at::index_select(data_.labels(), 0, rows)};
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
  return {data.images().narrow(0, first, count), data.labels().narrow(0, first, count)};
}

}  // namespace gradc::runtime
