// The portable convolution, adaptive pooling and batch-norm kernels (convDeviceKernels(),
// runtime/kernels/kernels.h): the host's (runtime/kernels/kernels_conv.cpp) walk memory through raw pointers
// (im2col blocks, per-channel loops); on any other device (runtime/device/device.h: a CUDA GPU) the same
// ops are ATen's device kernels -- cuDNN's
// convolution and its two gradients, batch statistics as ATen reductions -- each result copied
// into its planned buffer. The arithmetic is the op's definition, rounded as the device's
// kernels round it; what they allocate is measured as the device's internal bytes.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "runtime/kernels/kernels.h"

namespace gradc::runtime::conv_device {

std::vector<at::Tensor> conv2d(const KernelArgs& a);
std::vector<at::Tensor> conv2dInputGrad(const KernelArgs& a);
std::vector<at::Tensor> conv2dWeightGrad(const KernelArgs& a);
std::vector<at::Tensor> batchNorm(const KernelArgs& a);
std::vector<at::Tensor> batchNormBackward(const KernelArgs& a);
std::vector<at::Tensor> runningStatsUpdate(const KernelArgs& a);
std::vector<at::Tensor> batchNormInference(const KernelArgs& a);
std::vector<at::Tensor> adaptiveAvgPool2d(const KernelArgs& a);
std::vector<at::Tensor> adaptiveAvgPool2dBackward(const KernelArgs& a);

}  // namespace gradc::runtime::conv_device
