# The runtime's ground: vocabulary every other folder shares (dtypes, tensor maps, counter-based
# RNG, step scalars, small files, JSON from outside, the host's cores). Includes only ir/.
set(GRADC_RUNTIME_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/counter_rng.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_cores.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_text.cpp
)
