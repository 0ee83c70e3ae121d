# The CUDA backend's description (no LibTorch: every build plans for GPUs). Its runtime sources
# (sources.cmake) need a CUDA LibTorch; without one, its row says so (cuda_absent.cpp).
list(APPEND GRADC_KERNEL_TARGET_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_target.cpp)
if(NOT GRADC_TORCH_HAS_CUDA)
  list(APPEND GRADC_BACKEND_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_absent.cpp)
endif()
