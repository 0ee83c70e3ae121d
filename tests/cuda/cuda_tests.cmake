# The CUDA device against the CPU (runtime/cuda/). Built only against a CUDA LibTorch, so it runs
# on a GPU machine (scripts/gpu-check.sh); CI compiles the CUDA sources without it.
if(GRADC_TORCH_HAS_CUDA)
  gradc_add_test(cuda_tests cuda/cuda_device_test.cpp cuda/ptx_kernels_test.cpp LIBS gradc_runtime)
endif()
