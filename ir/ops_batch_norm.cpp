// The op table's batch normalisation (training with batch statistics, evaluation with running
// statistics) and the update of the running statistics.
//
// batch_norm(x[N, C, ...], weight[C], bias[C]){eps} -> (y, mean[C], invstd[C], var[C]): the
//   statistics of each channel over (N, ...); y = (x - mean) * invstd * weight + bias with
//   invstd = 1 / sqrt(biased variance + eps). mean and invstd are saved for backward; var is the
//   unbiased variance (count / (count - 1)), which only the running statistics read.
//   OpInfo::batchStatistics: a split batch (micro-batches, data-parallel ranks) normalises each
//   shard with its own statistics, as PyTorch's DDP without SyncBatchNorm does.
// batch_norm_backward(grad, x, mean, invstd, weight) -> (grad_x, grad_weight, grad_bias).
// running_stats_update(running_mean, running_var, num_batches_tracked, mean, var){momentum}:
//   in place, running = (1 - momentum) * running + momentum * batch and num_batches_tracked + 1,
//   as torch.nn.BatchNorm2d does in training. A separate node right after the batch_norm it
//   reads, and not a result of it, so a recomputed batch_norm (remat) never updates the
//   statistics a second time: recomputation only clones nodes whose results backward reads,
//   and this node has none.
// batch_norm_inference(x, weight, bias, running_mean, running_var){eps} -> y: evaluation mode
//   (gradc eval), normalising with the running statistics; never differentiated.
#include <string>

#include "ir/op_rules.h"

namespace gradc::ir {
namespace {
using namespace rules;
using Types = std::span<const TensorType>;

// Values of one channel: N times the spatial extents.
std::int64_t perChannel(const TensorType& x) { return x.rank() < 2 ? 0 : x.numel() / x.shape[1]; }

Status checkChannelVector(const TensorType& v, const TensorType& x, std::string_view what) {
  const Shape channels{x.shape[1]};
  if (v.dtype != x.dtype || v.shape != channels)
    return Error{std::string(what) + " must be " + std::string(dtypeName(x.dtype)) + shapeToString(channels) + ", got " +
                 typeStr(v)};
  return {};
}

Status checkInput(const OpContext& c) {
  const TensorType& x = c.inputs[0];
  if (Status s = requireFloat(x, "the input"); !s) return s;
  if (x.rank() < 2) return Error{"the input must be [N, C, ...], got " + typeStr(x)};
  if (*getFloat(c.attrs, "eps") <= 0) return Error{"eps must be positive"};
  return {};
}

Results inferBatchNorm(const OpContext& c) {
  if (Status s = checkInput(c); !s) return s.error();
  const TensorType& x = c.inputs[0];
  if (Status s = checkChannelVector(c.inputs[1], x, "the weight"); !s) return s.error();
  if (Status s = checkChannelVector(c.inputs[2], x, "the bias"); !s) return s.error();
  if (perChannel(x) < 2)
    return fail("batch statistics need more than one value per channel, got input " + typeStr(x) +
                " (as torch.nn.BatchNorm2d in training)");
  const TensorType stat{x.dtype, {x.shape[1]}};
  return std::vector<TensorType>{x, stat, stat, stat};
}

Results inferBatchNormBackward(const OpContext& c) {
  const TensorType& g = c.inputs[0];
  const TensorType& x = c.inputs[1];
  if (Status s = requireFloat(x, "the input"); !s) return s.error();
  if (x.rank() < 2) return fail("the input must be [N, C, ...], got " + typeStr(x));
  if (g != x) return fail("the gradient must have the input's type " + typeStr(x) + ", got " + typeStr(g));
  const char* names[] = {"the mean", "invstd", "the weight"};
  for (size_t i = 2; i < 5; ++i)
    if (Status s = checkChannelVector(c.inputs[i], x, names[i - 2]); !s) return s.error();
  const TensorType stat{x.dtype, {x.shape[1]}};
  return std::vector<TensorType>{x, stat, stat};
}

Results inferRunningStatsUpdate(const OpContext& c) {
  const TensorType& rm = c.inputs[0];
  if (Status s = requireFloat(rm, "the running mean"); !s) return s.error();
  if (rm.rank() != 1) return fail("the running mean must be a vector [C], got " + typeStr(rm));
  if (c.inputs[1] != rm || c.inputs[3] != rm || c.inputs[4] != rm)
    return fail("the running and batch statistics must all be " + typeStr(rm));
  if (c.inputs[2] != TensorType{DType::i64, {}})
    return fail("num_batches_tracked must be i64[], got " + typeStr(c.inputs[2]));
  const double m = *getFloat(c.attrs, "momentum");
  if (!(m >= 0 && m <= 1)) return fail("momentum must be in [0, 1], got " + std::to_string(m));
  return std::vector<TensorType>{};
}

Results inferBatchNormInference(const OpContext& c) {
  if (Status s = checkInput(c); !s) return s.error();
  const TensorType& x = c.inputs[0];
  const char* names[] = {"the weight", "the bias", "the running mean", "the running variance"};
  for (size_t i = 1; i < 5; ++i)
    if (Status s = checkChannelVector(c.inputs[i], x, names[i - 1]); !s) return s.error();
  return std::vector<TensorType>{x};
}

// Two passes for the statistics, one for the transform.
std::int64_t flopsBatchNorm(const OpContext& c, Types) { return 7 * c.inputs[0].numel(); }
// Sums of grad and grad * xhat, then the input gradient.
std::int64_t flopsBatchNormBackward(const OpContext& c, Types) { return 9 * c.inputs[1].numel(); }
std::int64_t flopsRunningStatsUpdate(const OpContext& c, Types) { return 6 * c.inputs[0].numel(); }

}  // namespace

std::vector<OpInfo> batchNormOps() {
  const AttrSpec eps{"eps", AttrKind::Float, true, "added to the variance"};
  return {
      {.name = "batch_norm", .minInputs = 3, .maxInputs = 3, .attrs = {eps}, .infer = inferBatchNorm,
       .flops = flopsBatchNorm, .batchStatistics = true,
       .summary = "normalise each channel of x[N, C, ...] with its batch statistics, then * weight + bias; "
                  "results (y, mean, invstd, unbiased var)"},
      {.name = "batch_norm_backward", .minInputs = 5, .maxInputs = 5, .infer = inferBatchNormBackward,
       .flops = flopsBatchNormBackward,
       .summary = "(grad, x, mean, invstd, weight) -> (grad_x, grad_weight, grad_bias)"},
      {.name = "running_stats_update", .minInputs = 5, .maxInputs = 5,
       .attrs = {{"momentum", AttrKind::Float, true, "weight of the batch statistics"},
                 {"cumulative", AttrKind::Bool, false,
                  "true: the weight is 1 / (num_batches_tracked + 1), a cumulative average (momentum ignored)"}},
       .infer = inferRunningStatsUpdate, .flops = flopsRunningStatsUpdate, .sideEffects = true,
       .role = OpRole::RunningStatsUpdate,
       .summary = "(running_mean, running_var, num_batches_tracked, mean, var): PyTorch's running statistics "
                  "update, in place"},
      {.name = "batch_norm_inference", .minInputs = 5, .maxInputs = 5, .attrs = {eps},
       .infer = inferBatchNormInference, .flops = perResultElement<4>,
       .summary = "(x, weight, bias, running_mean, running_var): normalise with the running statistics "
                  "(evaluation)"},
  };
}

}  // namespace gradc::ir
