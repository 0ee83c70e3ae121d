# Devices: the device seam, the CPU device, the host's memory and cores, choosing a rank's device.
set(GRADC_RUNTIME_DEVICE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/backends.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_select.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_memory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_cores.cpp
)
