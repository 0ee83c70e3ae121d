# The CUDA device's sources: C++ that needs a CUDA LibTorch, and kernels nvcc compiles.
set(GRADC_RUNTIME_CUDA_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda/cuda_device.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda/cuda_kernels.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda/nccl_tensor_communicator.cpp
)
set(GRADC_RUNTIME_CUDA_KERNELS
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda/dropout_kernel.cu
  ${CMAKE_CURRENT_SOURCE_DIR}/cuda/softmax_backward_kernel.cu
)
