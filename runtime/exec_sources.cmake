set(GRADC_RUNTIME_EXEC_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/counter_rng.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/executor.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/kernels_backward.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/kernels_forward.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/kernels_optimizer.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/memory_tracker.cpp
)
