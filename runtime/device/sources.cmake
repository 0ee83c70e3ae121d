# Devices: the device seam, the CPU device, the host's memory.
set(GRADC_RUNTIME_DEVICE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_memory.cpp
)
