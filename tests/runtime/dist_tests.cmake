# Distributed runtime: environment, Gloo communicator across forked ranks, launcher. Each case
# forks processes and some wait out a (short) timeout, so they run one at a time.
add_executable(runtime_dist_tests
  runtime/cpu_cores_test.cpp
  runtime/host_memory_test.cpp
  runtime/dist_env_test.cpp
  runtime/gloo_communicator_test.cpp
  runtime/launcher_test.cpp)
target_link_libraries(runtime_dist_tests PRIVATE gradc_test_main gradc_runtime)
doctest_discover_tests(runtime_dist_tests TEST_PREFIX "runtime_dist_tests/" PROPERTIES RUN_SERIAL TRUE TIMEOUT 60)

# NCCL (only where gradc_nccl is built): library version, and a clear Error without a GPU.
if(TARGET gradc_nccl)
  gradc_add_test(runtime_nccl_tests runtime/nccl_communicator_test.cpp LIBS gradc_nccl)
endif()
