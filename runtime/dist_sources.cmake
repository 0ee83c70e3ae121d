set(GRADC_RUNTIME_DIST_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/cpu_cores.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/host_memory.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/dist_env.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/gloo_communicator.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/launcher.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tcp_kv_store.cpp
)
