# The host backend: its description (no LibTorch) and its row of the backend table.
list(APPEND GRADC_KERNEL_TARGET_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/host_target.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_workspace_products.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_conv_problem.cpp)
list(APPEND GRADC_BACKEND_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/host_backend.cpp)
