# The reference backend: its description (no LibTorch) and its row of the backend table.
list(APPEND GRADC_KERNEL_TARGET_SOURCES ${CMAKE_CURRENT_LIST_DIR}/reference_target.cpp)
list(APPEND GRADC_BACKEND_RUNTIME_SOURCES ${CMAKE_CURRENT_LIST_DIR}/reference_backend.cpp)
