# The CUDA device's sources: C++ that needs a CUDA LibTorch, and kernels nvcc compiles.
set(GRADC_RUNTIME_CUDA_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cuda_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda_device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cuda_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_tensor_communicator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ptx_kernels.cpp
)
set(GRADC_RUNTIME_CUDA_KERNELS
  ${CMAKE_CURRENT_LIST_DIR}/dropout_kernel.cu
  ${CMAKE_CURRENT_LIST_DIR}/softmax_backward_kernel.cu
)
