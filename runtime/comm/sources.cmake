# Communication: Gloo, the rank environment and rendezvous, the launcher, agreement between ranks.
set(GRADC_RUNTIME_COMM_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/collective_context.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dist_env.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gloo_communicator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/launcher.cpp
  ${CMAKE_CURRENT_LIST_DIR}/library_logging.cpp
  ${CMAKE_CURRENT_LIST_DIR}/mesh_groups.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tcp_kv_store.cpp
)
