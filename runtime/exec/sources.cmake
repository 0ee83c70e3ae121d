# Execution: the executor, its arena and plan, RNG, memory tracking.
set(GRADC_RUNTIME_EXEC_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/executor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/executor_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernel_call.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_tracker.cpp
)
