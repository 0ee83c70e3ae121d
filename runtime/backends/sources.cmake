# The composition root: the backend table (its rows made by the backends' folders,
# backends.def) and choosing a rank's backend.
set(GRADC_RUNTIME_BACKENDS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/backends.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device_select.cpp
)
