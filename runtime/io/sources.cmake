# I/O: artifacts, safetensors, checkpoints, datasets, atomic files, kernel trust.
set(GRADC_RUNTIME_IO_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/artifact.cpp
  ${CMAKE_CURRENT_LIST_DIR}/atomic_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/data.cpp
  ${CMAKE_CURRENT_LIST_DIR}/file_mapping.cpp
  ${CMAKE_CURRENT_LIST_DIR}/token_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/image_data.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernel_trust.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sha256.cpp
)
